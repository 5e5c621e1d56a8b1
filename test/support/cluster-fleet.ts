import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { createProducer, type Producer } from '../../src/producer/index.js';
import { connect } from '../../src/redis/connections.js';
import { shardLayout, shardOf, type Shard } from '../../src/redis/keys.js';
import type { Simulator } from '../../src/simulator/index.js';
import type { CliProcess } from './cli.js';
import { drillSettings } from './drill-fleet.js';
import { keySlot } from '../../src/redis/slot.js';
import {
  nodeOfSlot,
  startLocalCluster,
  type ClusterPersistence,
  type LocalCluster,
} from './redis-cluster.js';
import { stopAll } from './roles.js';

/**
 * A fleet on a local Redis Cluster for a test file: the cluster (started before the first test,
 * destroyed after the last, with any process still listed in `processes`), a cluster client, the
 * settings of a role process, and readings of every shard's stream.
 */
export interface ClusterFleet {
  readonly cluster: LocalCluster;
  readonly redis: Redis;
  readonly prefix: string;
  readonly shardCount: number;
  /** Processes to stop after the file; a test removes those it stopped itself. */
  readonly processes: CliProcess[];
  /** The environment of a role process (`settings` on top). */
  env(settings?: Record<string, string>): Record<string, string>;
  shards(): Shard[];
  /** A producer of this fleet; the caller closes it. */
  producer(): Producer;
  /** `count` project ids spread evenly over the shards (see below). */
  evenProjects(count: number, tag: string): string[];
  /** The events of every shard whose `meta.prompt` is set, with that prompt. */
  promptEvents(): Promise<{ dispatchId: string; prompt: string }[]>;
}

/** Starts a cluster of `masters` for the file's tests; returns a getter of its {@link ClusterFleet}. */
export function useClusterFleet(
  simulator: () => Simulator,
  options: { masters: number; shards: number; persistence?: ClusterPersistence },
): () => ClusterFleet {
  let fleet: ClusterFleet | undefined;
  beforeAll(async () => {
    const cluster = await startLocalCluster(options.masters, options.persistence);
    // Every node a seed: the test's client (and its duplicates) outlive a killed master.
    const seeds = cluster.nodes.map((n) => n.url).join(',');
    const redis = connect({ redisUrl: seeds, redisCluster: true }, 'worker', 'test');
    const prefix = await evenPrefix(cluster, options.shards, options.masters);
    fleet = fleetOn(cluster, redis, prefix, options.shards, simulator);
  }, 60_000);
  afterAll(async () => {
    try {
      await stopAll(fleet?.processes.splice(0) ?? []);
    } finally {
      fleet?.redis.disconnect();
      await fleet?.cluster.destroy();
    }
  });
  return () => {
    if (!fleet) throw new Error('useClusterFleet(): the cluster starts in beforeAll');
    return fleet;
  };
}

/**
 * A random prefix whose shards sit `shards / masters` on each master of `cluster`. The layout
 * splits the slot space at floor(i × 16384 / shards), `redis-cli --cluster create` at its own
 * rounding: where the two differ by one slot (10922, with 6 shards on 3 masters), about one prefix
 * in 3,300 puts a shard on the next master (CHANGELOG, known issues). The tests are about what an
 * even layout does, so they are given one.
 */
async function evenPrefix(cluster: LocalCluster, shards: number, masters: number): Promise<string> {
  for (;;) {
    const prefix = `t-cluster-${randomBytes(4).toString('hex')}`;
    if (shards % masters !== 0) return prefix;
    const perMaster = new Map<number, number>();
    for (const shard of shardLayout(prefix, `${prefix}:events`, shards, true)) {
      const master = await nodeOfSlot(cluster, keySlot(shard.prefix));
      perMaster.set(master, (perMaster.get(master) ?? 0) + 1);
    }
    if ([...perMaster.values()].every((n) => n === shards / masters)) return prefix;
  }
}

function fleetOn(
  cluster: LocalCluster,
  redis: Redis,
  prefix: string,
  shardCount: number,
  simulator: () => Simulator,
): ClusterFleet {
  const eventsStream = `${prefix}:events`;
  const shards = () => shardLayout(prefix, eventsStream, shardCount, true);
  return {
    cluster,
    redis,
    prefix,
    shardCount,
    processes: [],
    env: (settings = {}) => ({
      ...drillSettings(simulator().url, eventsStream),
      REDIS_URL: cluster.url,
      REDIS_CLUSTER: 'true',
      REDIS_DURABILITY: 'none',
      DISPATCH_SHARDS: String(shardCount),
      DISPATCH_PREFIX: prefix,
      ...settings,
    }),
    shards,
    producer: () =>
      createProducer({
        redisUrl: cluster.url,
        prefix,
        shards: shardCount,
        cluster: true,
        durability: { mode: 'none' },
      }),
    evenProjects: (count, tag) => evenProjects(count, tag, shardCount),
    async promptEvents() {
      const pages = await Promise.all(shards().map((s) => redis.xrange(s.eventsStream, '-', '+')));
      return pages.flat().flatMap(([, flat]) => {
        const fields = new Map<string, string>();
        for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i] ?? '', flat[i + 1] ?? '');
        const event = JSON.parse(fields.get('event') ?? '{}') as { meta?: { prompt?: string } };
        const prompt = event.meta?.prompt;
        return prompt ? [{ dispatchId: fields.get('dispatchId') ?? '', prompt }] : [];
      });
    },
  };
}

/**
 * `count` project ids spread evenly over the shards (at most ceil(count / shards) each): which
 * shard a name hashes to is luck, and 20 names can land 10/4/6 on three masters; the tests are
 * about the layout spreading what it is given, so they are given an even set of projects.
 */
function evenProjects(count: number, tag: string, shards: number): string[] {
  const cap = Math.ceil(count / shards);
  const perShard = new Array<number>(shards).fill(0);
  const picked: string[] = [];
  for (let n = 0; picked.length < count; n++) {
    const id = `${tag}${n}`;
    const shard = shardOf(id, shards);
    if ((perShard[shard] ?? 0) >= cap) continue;
    perShard[shard] = (perShard[shard] ?? 0) + 1;
    picked.push(id);
  }
  return picked;
}
