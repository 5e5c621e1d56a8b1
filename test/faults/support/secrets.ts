import type { Redis } from 'ioredis';

/** One secret and its name, for the report. */
export interface Secret {
  readonly name: string;
  readonly value: string;
}

/** Where a secret was found. */
export interface Leak {
  readonly secret: string;
  readonly place: string;
}

/** A pile of text by place, searched for secrets (raw and base64 of the raw). */
export class Haystack {
  readonly places = new Map<string, number>();
  readonly leaks: Leak[] = [];

  constructor(private readonly secrets: readonly Secret[]) {}

  /** Adds `text` found at `place` (counted under `kind`). */
  add(kind: string, place: string, text: string): void {
    this.places.set(kind, (this.places.get(kind) ?? 0) + 1);
    for (const s of this.secrets) {
      if (text.includes(s.value) || text.includes(Buffer.from(s.value).toString('base64')))
        this.leaks.push({ secret: s.name, place: `${kind}: ${place}` });
    }
  }

  /** Every line of a process's output. */
  addOutput(name: string, output: { stdout: string; stderr: string }): void {
    for (const [stream, text] of Object.entries(output)) {
      text
        .split('\n')
        .filter(Boolean)
        .forEach((line, i) => this.add('log lines', `${name} ${stream} line ${i + 1}`, line));
    }
  }
}

/** Every key of the Redis (its name and its value, read by type), or those matching `match`. */
export async function addRedis(haystack: Haystack, redis: Redis, match = '*'): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    cursor = next;
    for (const key of keys)
      haystack.add('Redis keys and values', key, `${key}\n${await valueOf(redis, key)}`);
  } while (cursor !== '0');
}

async function valueOf(redis: Redis, key: string): Promise<string> {
  switch (await redis.type(key)) {
    case 'string':
      return (await redis.get(key)) ?? '';
    case 'hash':
      return JSON.stringify(await redis.hgetall(key));
    case 'list':
      return JSON.stringify(await redis.lrange(key, 0, -1));
    case 'set':
      return JSON.stringify(await redis.smembers(key));
    case 'zset':
      return JSON.stringify(await redis.zrange(key, 0, -1, 'WITHSCORES'));
    case 'stream':
      return JSON.stringify(await redis.xrange(key, '-', '+'));
    default:
      return '';
  }
}

/** GETs `path` and adds its status, headers and body. Resolves to the body. */
export async function addPage(
  haystack: Haystack,
  base: string,
  path: string,
  headers: Record<string, string>,
): Promise<string> {
  const res = await fetch(`${base}${path}`, { headers, redirect: 'manual' });
  const body = await res.text();
  haystack.add(
    'HTTP answers',
    `GET ${path}`,
    `${res.status}\n${JSON.stringify([...res.headers])}\n${body}`,
  );
  return body;
}

/** The dashboard: its page, the API JSON of every queue in every status, and some jobs. */
export async function addDashboard(haystack: Haystack, base: string, token: string): Promise<void> {
  const auth = { authorization: `Bearer ${token}` };
  await addPage(haystack, base, '/dashboard', auth);
  await addPage(haystack, base, `/dashboard?token=${token}`, {});
  await addPage(haystack, base, '/dashboard/api/redis/stats', auth);
  const list = JSON.parse(await addPage(haystack, base, '/dashboard/api/queues', auth)) as {
    queues?: { name: string }[];
  };
  const statuses = ['latest', 'active', 'waiting', 'completed', 'failed', 'delayed', 'paused'];
  for (const { name } of list.queues ?? []) {
    await addPage(
      haystack,
      base,
      `/dashboard/api/queues/${encodeURIComponent(name)}/workers`,
      auth,
    );
    for (const status of statuses) {
      const page = JSON.parse(
        await addPage(
          haystack,
          base,
          `/dashboard/api/queues?activeQueue=${encodeURIComponent(name)}&status=${status}&page=1&jobsPerPage=50`,
          auth,
        ),
      ) as { queues?: { name: string; jobs?: { id: string }[] }[] };
      const jobs = page.queues?.find((q) => q.name === name)?.jobs ?? [];
      for (const job of jobs.slice(0, 5))
        await addPage(
          haystack,
          base,
          `/dashboard/api/queues/${encodeURIComponent(name)}/${encodeURIComponent(job.id)}`,
          auth,
        );
    }
  }
  for (const path of ['/metrics', '/healthz', '/readyz']) await addPage(haystack, base, path, {});
}
