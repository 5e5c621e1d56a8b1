import { connect, type Socket } from 'node:net';

/**
 * What a server runs, as `MONITOR` reports it: every command of every client, in the order the
 * server ran them. {@link Monitor.settle} makes the feed complete up to now (the events arrive
 * after the replies), so a count of zero is a count, not a feed that lags.
 *
 * The feed is read from a socket of its own, not through ioredis: on a busy server the first
 * monitored lines can arrive in the same packet as MONITOR's `OK`, before ioredis has switched the
 * connection to monitoring, and it then fails with "Command queue state error".
 */
export interface Monitor {
  /** The commands seen so far, each as its name (upper case) and arguments. */
  readonly commands: readonly (readonly string[])[];
  /** The client (`host:port`, or `lua` inside a script) that sent each, at the same index. */
  readonly sources: readonly string[];
  /** How many of them were `name` (case-insensitive). */
  count(name: string): number;
  /** Resolves once every command the server ran before this call is in {@link Monitor.commands}. */
  settle(): Promise<void>;
  stop(): Promise<void>;
}

/** One monitored command: its arguments as sent, and its client (`lua` inside a script). */
export interface Monitored {
  readonly args: readonly string[];
  readonly source: string;
}

/** Starts monitoring the server at `url`; `onCommand` sees each command as it is reported. */
export async function monitorServer(
  url: string,
  onCommand: (command: Monitored) => void = () => {},
): Promise<Monitor> {
  const commands: string[][] = [];
  const sources: string[] = [];
  const waiting = new Map<string, () => void>();
  const feed = await openFeed(url, ({ args, source }) => {
    const [name = '', ...rest] = args;
    if (name.toUpperCase() === 'ECHO' && waiting.has(rest[0] ?? '')) {
      waiting.get(rest[0] ?? '')?.();
      return;
    }
    commands.push([name.toUpperCase(), ...rest]);
    sources.push(source);
    onCommand({ args, source });
  });
  return {
    commands,
    sources,
    count: (name) => commands.filter(([n]) => n === name.toUpperCase()).length,
    async settle() {
      const marker = `monitor-settle-${Math.random().toString(36).slice(2)}`;
      let timer: NodeJS.Timeout | undefined;
      const seen = new Promise<void>((resolve, reject) => {
        waiting.set(marker, resolve);
        timer = setTimeout(
          () => reject(new Error('MONITOR did not report a marker in 10 s')),
          10_000,
        );
      });
      try {
        await echo(url, marker);
        await seen;
      } finally {
        clearTimeout(timer);
        waiting.delete(marker);
      }
    },
    async stop() {
      feed.destroy();
    },
  };
}

/** A socket that sent MONITOR, resolved once the server said OK; each later line to `onLine`. */
function openFeed(url: string, onLine: (command: Monitored) => void): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port || 6379), hostname.replace(/^\[|\]$/g, ''));
    let buffered = '';
    let ready = false;
    socket.setEncoding('latin1');
    socket.on('connect', () => socket.write('MONITOR\r\n'));
    // A server a test stops goes away under the feed: that is no failure of the monitor.
    socket.on('error', (err) => (ready ? undefined : reject(err)));
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      for (let end = buffered.indexOf('\r\n'); end >= 0; end = buffered.indexOf('\r\n')) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (!ready) {
          if (line !== '+OK') return reject(new Error(`MONITOR answered ${line}`));
          ready = true;
          resolve(socket);
          continue;
        }
        const parsed = parseLine(line);
        if (parsed) onLine(parsed);
      }
    });
  });
}

/** `+<time> [<db> <source>] "arg" "arg"...`, the arguments escaped as Redis quotes them. */
function parseLine(line: string): Monitored | undefined {
  const head = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] /.exec(line);
  if (!head) return undefined;
  const args: string[] = [];
  for (const [, quoted] of line.slice(head[0].length).matchAll(/"((?:[^"\\]|\\.)*)"/g))
    args.push(unescape(quoted ?? ''));
  return { args, source: head[1] ?? '' };
}

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' };

function unescape(quoted: string): string {
  const bytes = quoted.replace(/\\(x[0-9a-f]{2}|.)/g, (_, code: string) =>
    code.length === 3 ? String.fromCharCode(parseInt(code.slice(1), 16)) : (ESCAPES[code] ?? code),
  );
  return Buffer.from(bytes, 'latin1').toString('utf8');
}

/** Sends `ECHO marker` on a connection of its own, and waits for its answer. */
function echo(url: string, marker: string): Promise<void> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port || 6379), hostname.replace(/^\[|\]$/g, ''));
    socket.on('error', reject);
    socket.on('connect', () =>
      socket.write(`*2\r\n$4\r\nECHO\r\n$${Buffer.byteLength(marker)}\r\n${marker}\r\n`),
    );
    socket.once('data', () => {
      socket.destroy();
      resolve();
    });
  });
}
