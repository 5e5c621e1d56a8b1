import { Redis } from 'ioredis';

/**
 * A direct check of Redis's durability claim: INCRs as fast as a few pipelines allow until Redis
 * goes away, remembering the highest value Redis acknowledged. After the restart the counter must
 * be at least that high: an acknowledged write that the restart lost shows up as a shortfall.
 */
export interface Canary {
  /** Highest value acknowledged so far. */
  acked(): number;
  /** When Redis acknowledged `value` (epoch ms), if it did. */
  ackedAt(value: number): number | undefined;
  /** Resolves when every loop has stopped (Redis went away), with the highest value acknowledged. */
  readonly done: Promise<number>;
}

/** Starts `loops` INCR loops on `key`; they stop at the first error. */
export function startCanary(url: string, key: string, loops = 2): Canary {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => {
    // The server is killed under it: the loops see the failure as a rejected INCR.
  });
  let highest = 0;
  const times = new Map<number, number>();
  const loop = async () => {
    await new Promise<void>((resolve) =>
      client.status === 'ready' ? resolve() : client.once('ready', resolve),
    );
    for (;;) {
      try {
        const value = await client.incr(key);
        times.set(value, Date.now());
        highest = Math.max(highest, value);
      } catch {
        return;
      }
    }
  };
  const done = Promise.all(Array.from({ length: loops }, loop)).then(() => {
    client.disconnect();
    return highest;
  });
  return { acked: () => highest, ackedAt: (value) => times.get(value), done };
}

/** The counter's value after the restart (0 when the key is gone). */
export async function readCounter(url: string, key: string): Promise<number> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    return Number((await client.get(key)) ?? 0);
  } finally {
    client.disconnect();
  }
}
