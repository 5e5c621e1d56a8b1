import { readdirSync, statSync } from 'node:fs';
import { createServer, Socket, type AddressInfo } from 'node:net';
import { join } from 'node:path';

/**
 * A TCP proxy in front of a Valkey that remembers how much of the AOF was surely written when each
 * WAITAOF answered: every time it forwards a WAITAOF reply, it records the size of the AOF's open
 * incr file. Valkey answers WAITAOF only after the fsync, so that size holds at least everything
 * fsynced then: cutting the file back to it after a SIGKILL leaves what a machine crash (the page
 * cache lost) would have left at best, for the writes the service waited for.
 *
 * The proxy also samples the size every 50 ms, for `REDIS_DURABILITY=none`, which never calls
 * WAITAOF: cut to the size of 1 s before a kill, it loses what `appendfsync everysec` may.
 */
export interface AofProxy {
  readonly url: string;
  /** The incr file's size when the last WAITAOF reply went through (0 before any). */
  lastWaitaofSize(): number;
  /** WAITAOF replies forwarded so far. */
  waitaofReplies(): number;
  /** The last sampled size at least `ms` old. */
  sizeAgo(ms: number): number;
  /** The incr file the sizes are of (the newest `appendonlydir/*.incr.aof`). */
  incrFile(): string;
  /**
   * After a restart: forgets the samples, and finds the incr file again (Valkey appends to the same
   * one after a restart; a new one starts its sizes from what it holds now).
   */
  reset(): void;
  close(): Promise<void>;
}

/** A WAITAOF reply: a two-integer array (`*2 :local :replicas`). */
const WAITAOF_REPLY = /\*2\r\n:\d+\r\n:\d+\r\n/g;
const WAITAOF_COMMAND = /WAITAOF/gi;

/** Starts the proxy in front of the Valkey at `target` whose data folder is `dir`. */
export async function startAofProxy(target: string, dir: string): Promise<AofProxy> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  let file = newestIncr(dir);
  let lastSize = 0;
  let replies = 0;
  let samples: { at: number; size: number }[] = [];
  const sizeNow = () => {
    try {
      return statSync(file).size;
    } catch {
      return 0;
    }
  };
  const sampler = setInterval(() => {
    samples.push({ at: Date.now(), size: sizeNow() });
    if (samples.length > 200) samples = samples.slice(-100);
  }, 50);
  const server = createServer((client) => {
    const upstream = new Socket();
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    let outstanding = 0;
    const commands = matcher(WAITAOF_COMMAND);
    const answers = matcher(WAITAOF_REPLY);
    client.on('data', (chunk: Buffer) => {
      outstanding += commands(chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      // A reply of this connection that may answer its WAITAOF. A look-alike reply of another
      // command only records a size later than needed: the cut then keeps more, never less.
      const found = answers(chunk);
      if (outstanding > 0 && found > 0) {
        outstanding = Math.max(0, outstanding - found);
        replies += found;
        lastSize = sizeNow();
      }
      client.write(chunk);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    upstream.connect(Number(port), hostname);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${address.port}`,
    lastWaitaofSize: () => lastSize,
    waitaofReplies: () => replies,
    sizeAgo(ms) {
      const before = Date.now() - ms;
      const old = samples.filter((s) => s.at <= before);
      return old.at(-1)?.size ?? 0;
    },
    incrFile: () => file,
    reset() {
      const found = newestIncr(dir);
      if (found !== file) lastSize = statSync(found).size;
      file = found;
      samples = [];
    },
    close: () =>
      new Promise<void>((resolve) => {
        clearInterval(sampler);
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * Counts the matches of `pattern` in a byte stream, chunk by chunk: a match split across two
 * chunks counts once, in the chunk where it ends.
 */
function matcher(pattern: RegExp): (chunk: Buffer) => number {
  let tail = '';
  return (chunk) => {
    const text = tail + chunk.toString('latin1');
    let n = 0;
    for (const m of text.matchAll(pattern)) if (m.index + m[0].length > tail.length) n++;
    tail = text.slice(-TAIL);
    return n;
  };
}

/** Longer than any match: the WAITAOF reply with two 10-digit counts is 30 bytes. */
const TAIL = 40;

/** The open incr file of a multi-part AOF: the highest-numbered `appendonlydir/*.incr.aof`. */
function newestIncr(dir: string): string {
  const folder = join(dir, 'appendonlydir');
  const incr = readdirSync(folder)
    .filter((name) => name.endsWith('.incr.aof'))
    .sort((a, b) => sequence(a) - sequence(b));
  const last = incr.at(-1);
  if (!last) throw new Error(`no incr AOF file in ${folder}`);
  return join(folder, last);
}

function sequence(name: string): number {
  return Number(/\.(\d+)\.incr\.aof$/.exec(name)?.[1] ?? 0);
}
