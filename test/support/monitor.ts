import { Redis } from 'ioredis';

/**
 * What a server runs, as `MONITOR` reports it: every command of every client, in the order the
 * server ran them. {@link Monitor.settle} makes the feed complete up to now (the events arrive
 * after the replies), so a count of zero is a count, not a feed that lags.
 */
export interface Monitor {
  /** The commands seen so far, each as its name (upper case) and arguments. */
  readonly commands: readonly (readonly string[])[];
  /** The client (`host:port`) that sent each of {@link Monitor.commands}, at the same index. */
  readonly sources: readonly string[];
  /** How many of them were `name` (case-insensitive). */
  count(name: string): number;
  /** Resolves once every command the server ran before this call is in {@link Monitor.commands}. */
  settle(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts monitoring the server at `url`. */
export async function monitorServer(url: string): Promise<Monitor> {
  const client = new Redis(url, { maxRetriesPerRequest: null });
  client.on('error', () => {});
  const feed = await client.monitor();
  // A server a test stops goes away under the feed: that is no failure of the monitor.
  feed.on('error', () => {});
  const commands: string[][] = [];
  const sources: string[] = [];
  const waiting = new Map<string, () => void>();
  feed.on('monitor', (_time: string, args: string[], source: string) => {
    const [name = '', ...rest] = args;
    if (name.toUpperCase() === 'ECHO' && waiting.has(rest[0] ?? '')) waiting.get(rest[0] ?? '')?.();
    else {
      commands.push([name.toUpperCase(), ...rest]);
      sources.push(source);
    }
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
        await client.echo(marker);
        await seen;
      } finally {
        clearTimeout(timer);
        waiting.delete(marker);
      }
    },
    async stop() {
      feed.disconnect();
      client.disconnect();
    },
  };
}
