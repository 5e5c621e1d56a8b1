import { z } from 'zod';
import {
  duration,
  integer,
  flag,
  httpUrl,
  durability,
  secret,
  keyName,
  shardSelection,
  LOG_FORMATS,
  LOG_LEVELS,
  OTLP_PROTOCOLS,
  tracesExporters,
} from './values.js';
import { HTTP_SERVER_SETTINGS, HTTP_TOKEN_SETTINGS } from './http-settings.js';
import { WEBHOOK_SETTINGS } from './webhook-settings.js';
import { BUDGET_SETTINGS } from './budget-settings.js';
import { redisUrl, sentinelName, sentinels } from './redis.js';

export { LOG_FORMATS, MIN_TOKEN_LENGTH } from './values.js';

/**
 * Every setting the service reads, with its default, in one table. The environment variable name is
 * the key; `--help` and the README's settings table are generated from the descriptions here.
 */

/** One setting: its parser, its default (as written in the environment) and what it means. */
interface Setting {
  readonly schema: z.ZodType;
  readonly default?: string;
  readonly secret?: boolean;
  readonly description: string;
}

/** The settings table. Order is the order of the README and `--help`. */
export const SETTINGS = {
  REDIS_URL: {
    schema: redisUrl,
    secret: true,
    description:
      '`redis://` or `rediss://`; for a cluster, a comma-separated list of seed nodes (implies REDIS_CLUSTER); `start` without it runs a private redis-server, other roles refuse to start',
  },
  REDIS_DURABILITY: {
    schema: durability,
    default: 'fsync',
    description:
      '`fsync` (WAITAOF 1 0 where a crash must not undo a write), `replicas:N` (WAITAOF 1 N), `none`; a trailing `!` refuses to start without the guarantee',
  },
  REDIS_CLUSTER: {
    schema: flag,
    default: 'false',
    description:
      '`true`: REDIS_URL is the seed node of a Redis Cluster (or Valkey cluster); checked against the server at start',
  },
  REDIS_SENTINELS: {
    schema: sentinels,
    description:
      'Redis Sentinel, instead of REDIS_URL: the sentinels as `host:port,...`; with REDIS_SENTINEL_NAME',
  },
  REDIS_SENTINEL_NAME: {
    schema: sentinelName,
    description: "the primary's name the sentinels watch (`sentinel monitor NAME ...`)",
  },
  DISPATCH_SHARDS: {
    schema: integer(1, 256),
    default: '1',
    description:
      'shards (hash tags) the keyspace is split into, a project in one; 1 keeps the single-prefix layout; change it only by the drain procedure (docs/cluster.md)',
  },
  SHARDS: {
    schema: shardSelection,
    description:
      'the shards a `worker` or `poller` process serves, such as `0-3` or `0,2,5`; default: every shard',
  },
  AGENT_API_URL: {
    schema: httpUrl,
    default: 'https://api.mintlify.com',
    description: 'base URL of the agent API',
  },
  AGENT_API_KEY: {
    schema: secret,
    secret: true,
    description:
      'bearer key of the agent API (or AGENT_API_KEY_FILE); never logged; only `start` without REDIS_URL runs without it (the demo, with the simulator)',
  },
  AGENT_API_KEY_FILE: {
    schema: z.string().min(1, { message: 'must not be empty' }),
    description:
      'file holding the key instead of AGENT_API_KEY (a Docker or Kubernetes secret); re-read on SIGHUP and when it changes',
  },
  DISPATCH_PREFIX: {
    schema: keyName,
    default: 'agent-dispatch',
    description: 'prefix of every Redis key the service writes; `{name}` form for Redis Cluster',
  },
  ...BUDGET_SETTINGS,
  WORKER_CONCURRENCY: {
    schema: integer(1, 1000),
    default: '16',
    description: 'sends in flight per worker process (upper bound of the adaptive limit)',
  },
  POLL_INTERVAL: {
    schema: duration(10),
    default: '5s',
    description: "period of the poller's scheduled tick",
  },
  EVENTS_STREAM: {
    schema: keyName,
    default: 'agent-dispatch:events',
    description: 'key of the completion-event stream',
  },
  EVENTS_MAXLEN: {
    schema: integer(1000, 1_000_000_000),
    default: '1000000',
    description: 'approximate cap on the stream length (XADD MAXLEN ~)',
  },
  HTTP_PORT: { schema: integer(0, 65535), default: '3000', description: 'port of the HTTP server' },
  ...HTTP_SERVER_SETTINGS,
  METRICS_PORT: {
    schema: integer(0, 65535),
    description: '`worker` and `poller` serve /metrics, /healthz and /readyz on this port when set',
  },
  LOG_LEVEL: {
    schema: z.enum(LOG_LEVELS, { message: `expected one of ${LOG_LEVELS.join(', ')}` }),
    default: 'info',
    description: 'pino log level',
  },
  LOG_FORMAT: {
    schema: z.enum(LOG_FORMATS, { message: `expected one of ${LOG_FORMATS.join(', ')}` }),
    description:
      '`json` (one JSON object per line) or `pretty` (for a person); default: `pretty` for `start` on a terminal, else `json`',
  },
  OTEL_TRACES_EXPORTER: {
    schema: tracesExporters,
    description:
      'traces: `otlp` (to OTEL_EXPORTER_OTLP_ENDPOINT), `console` or `zipkin`; off when unset or `none`. The SDK reads the other standard OTEL_* variables itself',
  },
  OTEL_EXPORTER_OTLP_PROTOCOL: {
    schema: z.enum(OTLP_PROTOCOLS, { message: `expected one of ${OTLP_PROTOCOLS.join(', ')}` }),
    description:
      'protocol of the OTLP exporter (read by the SDK); checked here; default `http/protobuf`',
  },
  TRACK_TIMEOUT: {
    schema: duration(1000),
    default: '24h',
    description: 'a sent follow-up not terminal after this ends as followup.timed_out',
  },
  ACTIVE_GRACE: {
    schema: duration(0),
    default: '2m',
    description:
      'a terminal status counts without the job having been seen active after the send only once this has passed',
  },
  POLL_MIN_INTERVAL: {
    schema: duration(10),
    default: '500ms',
    description: 'first wait between status reads of one follow-up',
  },
  POLL_MAX_INTERVAL: {
    schema: duration(10),
    default: '1m',
    description: 'cap of the backed-off wait between status reads',
  },
  POLL_LEARN: {
    schema: flag,
    default: 'true',
    description:
      "read a follow-up's job densely where its project's past runs ended, sparsely before; `false`: the growing schedule only",
  },
  POLL_CONCURRENCY: {
    schema: integer(1, 256),
    default: '64',
    description: 'status reads in flight per poll tick',
  },
  STALLED_TIMEOUT: {
    schema: duration(1000),
    default: '30s',
    description:
      "how long a dead worker's job waits before another worker takes it over (BullMQ lock)",
  },
  SEND_ATTEMPTS: {
    schema: integer(1, 50),
    default: '8',
    description: 'attempts for a send that failed transiently (5xx, not connected)',
  },
  SEND_TIMEOUT: {
    schema: duration(100),
    default: '30s',
    description: 'headers and body timeout of one API request',
  },
  CONNECT_TIMEOUT: {
    schema: duration(100),
    default: '10s',
    description: 'connect timeout of one API request',
  },
  AMBIGUOUS_RESEND: {
    schema: flag,
    default: 'false',
    description:
      'resend a follow-up whose delivery could not be settled instead of ending it undeliverable',
  },
  PROMPT_MAX_BYTES: {
    schema: integer(1, 10 * 1024 * 1024),
    default: '65536',
    description: 'largest prompt accepted, in UTF-8 bytes',
  },
  DISPATCH_RETENTION: {
    schema: duration(60_000),
    default: '7d',
    description: 'how long a finished follow-up and its idempotency key are kept',
  },
  DEAD_LETTER_RETENTION: {
    schema: duration(0),
    default: '7d',
    description:
      'how long a follow-up that ended undeliverable or timed out keeps its prompt for a redrive (at most DISPATCH_RETENTION; 0: not kept)',
  },
  REPAIR_GRACE: {
    schema: duration(1000),
    default: '1m',
    description: 'the poller re-adds the BullMQ job of a follow-up queued this long without one',
  },
  SHUTDOWN_TIMEOUT: {
    schema: duration(100),
    default: '10s',
    description: 'deadline for in-flight work on SIGTERM/SIGINT',
  },
  ...HTTP_TOKEN_SETTINGS,
  DASHBOARD_ALLOW_RETRIES: {
    schema: flag,
    default: 'false',
    description: 'let the dashboard retry failed jobs and promote delayed ones, nothing else',
  },
  DASHBOARD_ALLOW_CONTROLS: {
    schema: flag,
    default: 'false',
    description:
      'show pause, resume and cancel buttons on /dashboard/followups (the same code as the CLI)',
  },
  ...WEBHOOK_SETTINGS,
} as const satisfies Record<string, Setting>;

/** Name of one setting (its environment variable). */
export type SettingName = keyof typeof SETTINGS;
