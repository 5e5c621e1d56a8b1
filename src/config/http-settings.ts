import { z } from 'zod';
import { byteSize, flag, tokenList } from './values.js';

/**
 * The HTTP server's settings: where it listens, how much of a request body it reads, and the
 * tokens of each scope (see `src/http/scopes.ts`). Spread into the settings table by `settings.ts`.
 */

/** The scopes of the HTTP API, each with its own tokens. */
export const SCOPES = ['intake', 'events', 'operator', 'dashboard'] as const;
export type Scope = (typeof SCOPES)[number];

/** The tokens of each scope; a token may appear in several. */
export type ScopeTokens = Readonly<Record<Scope, readonly string[]>>;

/** The part of `Config` these settings give. */
export interface HttpConfig {
  /** The HTTP tokens of each scope (`INTAKE_TOKEN`...); an empty list turns the scope off. */
  readonly tokens: ScopeTokens;
  /** `METRICS_TOKEN`: bearer tokens `/metrics` needs; empty: open. */
  readonly metricsTokens: readonly string[];
  /** `HTTP_HOST`: the address the HTTP server binds. @defaultValue `127.0.0.1` */
  readonly httpHost: string;
  /** `HTTP_BODY_MAX`: the largest request body read. @defaultValue 4 MiB */
  readonly httpBodyMaxBytes: number;
  /** `HTTP_BODY_INFLIGHT_MAX`: request body bytes read at once across requests. @defaultValue 32 MiB */
  readonly httpBodyInflightMaxBytes: number;
  /** `TRUST_PROXY`: express `trust proxy`; the scheme and client address come from the proxy. */
  readonly trustProxy: boolean;
}

/** Where the server listens and what it reads. */
export const HTTP_SERVER_SETTINGS = {
  HTTP_HOST: {
    schema: z
      .string()
      .regex(/^[\w.:-]{1,253}$/, { message: 'expected an IP address or host name' }),
    default: '127.0.0.1',
    description:
      'address the HTTP server binds; `0.0.0.0` for every interface (the container sets it)',
  },
  HTTP_BODY_MAX: {
    schema: byteSize(1024, 1024 * 1024 * 1024),
    default: '4MiB',
    description: 'largest request body the HTTP server reads (413 past it), such as 512KiB or 4MiB',
  },
  HTTP_BODY_INFLIGHT_MAX: {
    schema: byteSize(1024, 16 * 1024 * 1024 * 1024),
    default: '32MiB',
    description:
      'bytes of request bodies read at once across all requests; past it a request gets 503 with Retry-After',
  },
  TRUST_PROXY: {
    schema: flag,
    default: 'false',
    description:
      'behind a TLS proxy: client addresses and the scheme from X-Forwarded-*, so the dashboard cookie is Secure',
  },
} as const;

/** The tokens of each scope, and of `/metrics`. */
export const HTTP_TOKEN_SETTINGS = {
  INTAKE_TOKEN: {
    schema: tokenList,
    secret: true,
    description:
      'producers over HTTP: enqueue, create, status (comma-separated list, each at least 16 characters); the intake is off without it',
  },
  EVENTS_TOKEN: {
    schema: tokenList,
    secret: true,
    description:
      'consumers over HTTP: GET /v1/events and /v1/events/stream (a list); off without it',
  },
  OPERATOR_TOKEN: {
    schema: tokenList,
    secret: true,
    description:
      'operators: cancel, project controls, redrive, webhooks, the buttons of the pages (a list); off without it',
  },
  DASHBOARD_TOKEN: {
    schema: tokenList,
    secret: true,
    description:
      'the pages under /dashboard, read-only (bearer, basic auth password or ?token=; a list); `start` makes one when unset',
  },
  METRICS_TOKEN: {
    schema: tokenList,
    secret: true,
    description: 'when set, /metrics needs it as a bearer token (a list); open without it',
  },
} as const;

/** A body limit no request could meet: one body must fit in the budget of all bodies. */
export function bodyLimitProblems(
  bodyMaxBytes: number,
  inflightMaxBytes: number,
): { setting: string; message: string }[] {
  if (bodyMaxBytes <= inflightMaxBytes) return [];
  const message = `must be at least HTTP_BODY_MAX (${bodyMaxBytes} bytes), got ${inflightMaxBytes} bytes`;
  return [{ setting: 'HTTP_BODY_INFLIGHT_MAX', message }];
}
