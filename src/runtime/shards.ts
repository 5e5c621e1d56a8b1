import { orgShare, type Config } from '../config/index.js';
import { shardLayout, type Shard } from '../redis/keys.js';
import type { Logger } from '../telemetry/logger.js';
import type { Role } from './role.js';

/**
 * How a process serves several shards: each shard is the same role built on a config whose
 * prefix and events stream are the shard's (see `shardLayout`), so a worker or poller of one shard
 * is exactly a worker or poller of an unsharded deployment, and N shards are N of them under one
 * {@link Role}.
 */

/** Every shard of the deployment `config` describes. */
export function shardsOf(config: Config): Shard[] {
  return shardLayout(config.prefix, config.eventsStream, config.shardCount, config.redisCluster);
}

/** The config of one shard: the deployment's, with the shard's prefix and events stream. */
export function shardConfig(config: Config, shard: Shard): Config {
  // Each shard enforces its share of the org limit in its own log (a script reaches one slot).
  const orgRateLimit = orgShare(config.orgRateLimit, shard.index, config.shardCount);
  return Object.freeze({
    ...config,
    prefix: shard.prefix,
    eventsStream: shard.eventsStream,
    orgRateLimit,
  });
}

/** The shards this process serves (`SHARDS`, every one by default). */
export function servedShards(config: Config): Shard[] {
  const all = shardsOf(config);
  return config.servedShards.flatMap((i) => (all[i] ? [all[i]] : []));
}

/** What a role needs from its process to start on one shard. */
export interface ShardKit {
  readonly config: Config;
  readonly logger: Logger;
}

/**
 * Starts `start` once per served shard, each on its shard's config and a logger that names the
 * shard (when there is more than one), and returns them as one role: running while all run,
 * closed together (each shard's own deadline-bounded shutdown, in parallel).
 */
export function startPerShard<K extends ShardKit>(
  name: string,
  kit: K,
  start: (kit: K) => Role,
): Role {
  const shards = servedShards(kit.config);
  if (shards.length === 1 && kit.config.shardCount === 1 && shards[0]) {
    return start({ ...kit, config: shardConfig(kit.config, shards[0]) });
  }
  const roles = shards.map((shard) =>
    start({
      ...kit,
      config: shardConfig(kit.config, shard),
      logger: kit.logger.child({ shard: shard.index }),
    }),
  );
  let closing: Promise<void> | undefined;
  return {
    name,
    running: () => !closing && roles.every((r) => r.running()),
    close() {
      closing ??= Promise.allSettled(roles.map((r) => r.close())).then((results) => {
        const failed = results.find((r) => r.status === 'rejected');
        if (failed) throw failed.reason;
      });
      return closing;
    },
  };
}
