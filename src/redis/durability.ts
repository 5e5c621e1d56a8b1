import type { Redis } from 'ioredis';
import type { DurabilitySetting } from '../config/durability.js';
import { configValue, mastersOf } from './connections.js';

/**
 * What survives a Redis crash (contract, promise 7). Redis acknowledges a write once it is in
 * memory; with `appendfsync everysec` the AOF reaches the disk up to a second or two later, so a
 * crash can take back writes that were already acknowledged: an accepted follow-up, or the intent
 * to send that keeps a prompt from going out twice. `WAITAOF numlocal numreplicas timeout` (Redis
 * 7.2+, Valkey) returns once every earlier write of the connection is fsynced locally (and on N
 * replicas); the service waits for it where a crash must not undo a write.
 */

/** What the server told us about itself. `unknown` where CONFIG GET is not allowed. */
export interface ServerFacts {
  /** `valkey 8.0.1`, `redis 7.0.15`. */
  readonly server: string;
  readonly waitaof: boolean;
  readonly appendonly: 'yes' | 'no' | 'unknown';
  readonly appendfsync: 'always' | 'everysec' | 'no' | 'unknown';
  readonly connectedReplicas: number;
}

/**
 * Reads the facts that decide durability: the server and its version, AOF and fsync settings. On
 * a cluster every master is asked (each shard's writes wait on its own master), and the weakest
 * answer of each fact counts.
 */
export async function probeServer(redis: Redis): Promise<ServerFacts> {
  const all = await Promise.all((await mastersOf(redis)).map(probeNode));
  const weakest = <T extends string>(pick: (f: ServerFacts) => T, order: readonly T[]) =>
    order.find((value) => all.some((f) => pick(f) === value)) ?? (order.at(-1) as T);
  return {
    server: [...new Set(all.map((f) => f.server))].join(', '),
    waitaof: all.every((f) => f.waitaof),
    appendonly: weakest((f) => f.appendonly, ['no', 'unknown', 'yes'] as const),
    appendfsync: weakest((f) => f.appendfsync, ['no', 'everysec', 'unknown', 'always'] as const),
    connectedReplicas: Math.min(...all.map((f) => f.connectedReplicas)),
  };
}

async function probeNode(redis: Redis): Promise<ServerFacts> {
  const info = await redis.info();
  const field = (name: string) => new RegExp(`^${name}:(.*?)\\s*$`, 'm').exec(info)?.[1];
  const valkey = field('valkey_version');
  const version = valkey ?? field('redis_version') ?? '0';
  const [major = 0, minor = 0] = version.split('.').map(Number);
  // What cannot be read (CONFIG refused) is said to be unknown.
  const config = async (name: string) => (await configValue(redis, name)) ?? 'unknown';
  // INFO persistence has aof_enabled even where CONFIG is refused.
  const aofEnabled = field('aof_enabled');
  const appendonly = await config('appendonly');
  return {
    server: `${valkey ? 'valkey' : 'redis'} ${version}`,
    waitaof: valkey !== undefined || major > 7 || (major === 7 && minor >= 2),
    appendonly:
      appendonly === 'yes' || appendonly === 'no'
        ? appendonly
        : aofEnabled === '1'
          ? 'yes'
          : aofEnabled === '0'
            ? 'no'
            : 'unknown',
    appendfsync: oneOf(await config('appendfsync'), ['always', 'everysec', 'no'] as const),
    connectedReplicas: Number(field('connected_slaves') ?? 0),
  };
}

/**
 * How acknowledged writes are kept, as `/readyz` and the start-up log say it:
 * - `waitaof`: the service waits for WAITAOF where it matters (the promise holds);
 * - `appendfsync-always`: the server fsyncs every write before it answers (the promise holds);
 * - `none`: the operator chose `REDIS_DURABILITY=none`;
 * - `at-risk`: the promise does not hold on this server (see the warning).
 */
export type DurabilityMode = 'waitaof' | 'appendfsync-always' | 'none' | 'at-risk';

/** The outcome of {@link assessDurability}. */
export interface DurabilityAssessment {
  readonly mode: DurabilityMode;
  /** WAITAOF's numreplicas when `mode` is `waitaof`. */
  readonly replicas: number;
  /**
   * `REDIS_DURABILITY` ends in `!`: a master with fewer replicas than asked (its replica failed
   * or was promoted away) refuses writes instead of keeping them on fewer copies.
   */
  readonly strict?: boolean;
  /** One sentence for the start-up warning: what can be lost, and which setting to change. */
  readonly warning: string | undefined;
}

/** Decides how acknowledged writes are kept on this server with this setting. */
export function assessDurability(
  setting: DurabilitySetting,
  facts: ServerFacts,
): DurabilityAssessment {
  if (setting.mode === 'none') return { mode: 'none', replicas: 0, warning: undefined };
  const atRisk = (warning: string): DurabilityAssessment => ({
    mode: 'at-risk',
    replicas: 0,
    warning,
  });
  const loses =
    'a Redis crash can lose acknowledged writes: an accepted follow-up, or the record of a send, so a prompt may be sent twice';
  if (facts.appendonly === 'no') {
    return atRisk(
      `${facts.server} runs with appendonly no: ${loses}. Turn AOF on (appendonly yes).`,
    );
  }
  if (facts.waitaof && facts.appendonly === 'yes') {
    const replicaWarning =
      facts.connectedReplicas < setting.replicas
        ? `REDIS_DURABILITY asks for ${setting.replicas} replica(s) but ${facts.server} has ${facts.connectedReplicas} connected: until they connect, writes wait for the replicas there are${setting.strict ? ' and are refused (strict)' : ''}.`
        : undefined;
    return {
      mode: 'waitaof',
      replicas: setting.replicas,
      strict: setting.strict,
      warning: replicaWarning,
    };
  }
  if (facts.appendfsync === 'always' && setting.replicas === 0) {
    return { mode: 'appendfsync-always', replicas: 0, warning: undefined };
  }
  if (facts.appendonly === 'unknown' || facts.appendfsync === 'unknown') {
    return atRisk(
      `${facts.server} does not say whether appendonly and appendfsync keep every write (CONFIG GET refused), and has no WAITAOF: ${loses}.`,
    );
  }
  if (setting.replicas > 0) {
    return atRisk(
      `${facts.server} has no WAITAOF, so REDIS_DURABILITY=replicas:${setting.replicas} cannot wait for replicas: losing this machine loses what the replicas had not received.`,
    );
  }
  return atRisk(
    `${facts.server} has no WAITAOF and runs with appendfsync ${facts.appendfsync}: ${loses}, up to about 2 s of them. Use appendfsync always, or Redis 7.2+ / Valkey.`,
  );
}

const assessments = new Map<string, Promise<DurabilityAssessment>>();

/**
 * The assessment of the server at `redisUrl` with `setting`, probed once per process through
 * `redis` (a connection to that server): the start-up check and every store of the process share
 * it. A probe that failed is tried again by the next call.
 */
export function assessOnce(
  redisUrl: string,
  setting: DurabilitySetting,
  redis: Redis,
): Promise<DurabilityAssessment> {
  const key = `${redisUrl} ${JSON.stringify(setting)}`;
  let assessing = assessments.get(key);
  if (!assessing) {
    assessing = probeServer(redis).then((facts) => assessDurability(setting, facts));
    assessments.set(key, assessing);
    assessing.catch(() => assessments.delete(key));
  }
  return assessing;
}

/**
 * {@link assessOnce} for one server and setting, as a function a store calls on every write: the
 * settled assessment is kept here, so a write costs no lookup (a probe that failed is dropped and
 * tried again by the next call).
 */
export function assessor(
  redisUrl: string,
  setting: DurabilitySetting,
  redis: Redis,
): () => Promise<DurabilityAssessment> {
  let assessing: Promise<DurabilityAssessment> | undefined;
  return () => {
    if (!assessing) {
      const current = assessOnce(redisUrl, setting, redis);
      assessing = current;
      current.catch(() => {
        if (assessing === current) assessing = undefined;
      });
    }
    return assessing;
  };
}

function oneOf<T extends string>(value: string, allowed: readonly T[]): T | 'unknown' {
  return (allowed as readonly string[]).includes(value) ? (value as T) : 'unknown';
}
