import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * Where Redis is, as the settings say it: one `redis://` or `rediss://` URL (a single server, or
 * the seed of a cluster with `REDIS_CLUSTER`); a comma-separated list of seed nodes of a cluster
 * (`redis://a:7000,redis://b:7001`, or `redis://a:7000,b:7001`: credentials and TLS of the first
 * go to every node); or Redis Sentinel, which the config writes as
 * `redis-sentinel://host:port,host:port/NAME` (the form Lettuce uses) from `REDIS_SENTINELS` and
 * `REDIS_SENTINEL_NAME`, so every role and the library pass one string around.
 */

/** A host and port: a cluster's seed node, or a sentinel. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** A parsed {@link parseRedisAddress}. `url` carries the credentials and TLS of every node. */
export type RedisAddress =
  | { readonly kind: 'single'; readonly url: string }
  | { readonly kind: 'cluster'; readonly seeds: readonly HostPort[]; readonly url: URL }
  | { readonly kind: 'sentinel'; readonly sentinels: readonly HostPort[]; readonly name: string };

/** The scheme of the Sentinel form. */
export const SENTINEL_SCHEME = 'redis-sentinel:';

/**
 * A Redis address that cannot be used. The message names the part that is wrong and never echoes
 * the text, which may hold a password.
 */
export class RedisAddressError extends AgentDispatchError {
  readonly code = 'bad_redis_address';
  constructor(message: string) {
    super(message);
    this.name = 'RedisAddressError';
  }
}

/** Parses an address (see the file's comment); throws {@link RedisAddressError}. */
export function parseRedisAddress(text: string): RedisAddress {
  const value = text.trim();
  if (value.startsWith(`${SENTINEL_SCHEME}//`)) {
    const rest = value.slice(SENTINEL_SCHEME.length + 2);
    const slash = rest.indexOf('/');
    const name = slash === -1 ? '' : decodeURIComponent(rest.slice(slash + 1));
    if (name === '') throw new RedisAddressError('the Sentinel address names no primary');
    return { kind: 'sentinel', sentinels: parseHostPorts(rest.slice(0, slash)), name };
  }
  const items = value.split(',').map((item) => item.trim());
  const first = parseUrl(items[0] ?? '', items.length > 1 ? 'the first seed node' : 'the URL');
  if (items.length === 1) return { kind: 'single', url: value };
  const seeds = items.map((item, i) => {
    const where = `seed node ${i + 1} of ${items.length}`;
    if (item === '') throw new RedisAddressError(`${where} is empty (a stray comma?)`);
    if (/^rediss?:\/\//.test(item)) return hostPortOf(parseUrl(item, where), where);
    return parseHostPort(item, where);
  });
  return { kind: 'cluster', seeds, url: first };
}

/** Parses `host:port,host:port` (sentinels); throws {@link RedisAddressError}. */
export function parseHostPorts(text: string): HostPort[] {
  const items = text.split(',').map((item) => item.trim());
  return items.map((item, i) => parseHostPort(item, `entry ${i + 1} of ${items.length}`));
}

/** The Sentinel form of `sentinels` and the primary's `name`. */
export function sentinelAddress(sentinels: readonly HostPort[], name: string): string {
  const hosts = sentinels.map((s) => `${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`);
  return `${SENTINEL_SCHEME}//${hosts.join(',')}/${encodeURIComponent(name)}`;
}

function parseUrl(text: string, where: string): URL {
  if (!/^rediss?:\/\/\S+$/.test(text) || !URL.canParse(text))
    throw new RedisAddressError(`${where} is not a redis:// or rediss:// URL`);
  const url = new URL(text);
  if (url.hostname === '') throw new RedisAddressError(`${where} has no host`);
  return url;
}

function hostPortOf(url: URL, where: string): HostPort {
  return parseHostPort(`${url.hostname}:${url.port || '6379'}`, where);
}

function parseHostPort(text: string, where: string): HostPort {
  const match = /^\[?([^\s/@[\]]+?)\]?:(\d{1,5})$/.exec(text);
  const port = Number(match?.[2]);
  if (!match?.[1] || port < 1 || port > 65535)
    throw new RedisAddressError(`${where} is not host:port (a port from 1 to 65535)`);
  return { host: match[1], port };
}
