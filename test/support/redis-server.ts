import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../src/cli/embedded-redis.js';
import { hooksOf, type HookScope } from './hooks.js';

/** Tests import `freePort` from here, with the Redis fixtures; the one copy lives in src/. */
export { freePort };

/** A `redis-server` process of the test's own, on a free loopback port, with AOF on. */
export interface PrivateRedis {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** Kills the server with `signal` (SIGKILL simulates a crash) and waits for it to exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the server again on the same port and data folder (AOF replays). */
  restart(): Promise<void>;
  /** Stops the server and removes its data folder. */
  destroy(): Promise<void>;
}

/** Waits until a Redis at `url` answers PING, or throws after `timeoutMs`. */
export async function waitForRedis(url: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => {
      // Refused while the server starts: the loop below tries again.
    });
    try {
      await client.connect();
      await client.ping();
      return;
    } catch (err) {
      if (Date.now() > deadline)
        throw new Error(`redis at ${url} did not answer in ${timeoutMs} ms`, { cause: err });
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      client.disconnect();
    }
  }
}

/** How a private server keeps its writes; the default is how production runs Redis. */
export interface PersistenceOptions {
  /** @defaultValue `yes` */
  readonly appendonly?: 'yes' | 'no';
  /** @defaultValue `everysec` */
  readonly appendfsync?: 'always' | 'everysec' | 'no';
}

/** The Debian package of each server binary the tests start, for the error when one is missing. */
const PACKAGES: Record<string, string> = {
  'redis-server': 'apt-get install -y redis-server',
  'valkey-server':
    'apt-get install -y -t bookworm-backports valkey-server (README, prerequisites, enables the suite)',
};

/**
 * The arguments every test server starts with: on `port` of 127.0.0.1, in `dir`, with AOF as
 * `persistence` says (`appendonly` off and `appendfsync everysec` unless set), no RDB snapshots,
 * and `maxmemory-policy noeviction`, as production runs it.
 */
export function localServerArgs(
  port: number,
  dir: string,
  persistence: PersistenceOptions,
): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--appendonly',
    persistence.appendonly ?? 'no',
    '--appendfsync',
    persistence.appendfsync ?? 'everysec',
    '--save',
    '',
    '--maxmemory-policy',
    'noeviction',
  ];
}

/**
 * Deletes a server's data folder once the server is stopped. A server killed during an AOF
 * rewrite leaves its forked child writing the rewrite's temporary file for a moment, which makes
 * a single rmdir fail with ENOTEMPTY: retried, as Node's `rmSync` does with `maxRetries`.
 */
export function removeServerDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
}

/**
 * Starts `redis-server` (from PATH, or `binary`, such as `valkey-server`) with AOF (`appendfsync
 * everysec` unless `persistence` says otherwise) and `maxmemory-policy noeviction`, as production
 * runs it. Rejects, naming the package to install, if the binary is missing.
 */
export async function startPrivateRedis(
  binary = 'redis-server',
  persistence: PersistenceOptions = {},
): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  const { launch, stop } = serverProcess(
    binary,
    url,
    localServerArgs(port, dir, { appendonly: 'yes', ...persistence }),
  );
  await launch();
  return {
    url,
    port,
    dir,
    stop,
    restart: launch,
    destroy: async () => {
      await stop();
      removeServerDir(dir);
    },
  };
}

/** A private server and a client on it, for assertions. */
export interface ServedRedis {
  readonly server: PrivateRedis;
  /**
   * Waits through a restart (`maxRetriesPerRequest: null`); its connection errors are not
   * reported, since tests that restart the server cause them on purpose.
   */
  readonly redis: Redis;
}

/**
 * Starts a private `binary` server and a client on it once for the describe (`scope` `all`,
 * the default) or before each test; disconnects and destroys both after. Returns a getter.
 */
export function usePrivateRedis(
  binary = 'redis-server',
  scope: HookScope = 'all',
): () => ServedRedis {
  const [before, after] = hooksOf(scope);
  let served: ServedRedis | undefined;
  before(async () => {
    const server = await startPrivateRedis(binary);
    const redis = new Redis(server.url, { maxRetriesPerRequest: null });
    redis.on('error', () => {});
    served = { server, redis };
  });
  after(async () => {
    served?.redis.disconnect();
    await served?.server.destroy();
    served = undefined;
  });
  return () => {
    if (!served)
      throw new Error(`usePrivateRedis('${binary}'): the server runs inside a test only`);
    return served;
  };
}

/** A test's server process: `launch` (again after `stop`) and `stop` (no-op once it has exited). */
export interface ServerProcess {
  launch(): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
  pid(): number | undefined;
}

/**
 * `binary` with `args`, answering at `url` once launched. Launching rejects naming the package to
 * install when the binary is missing.
 */
export function serverProcess(binary: string, url: string, args: readonly string[]): ServerProcess {
  let child: ChildProcess | undefined;
  return {
    async launch() {
      const proc = spawn(binary, args, { stdio: 'ignore' });
      await new Promise<void>((resolve, reject) => {
        proc.once('error', (err: NodeJS.ErrnoException) =>
          reject(
            err.code === 'ENOENT'
              ? new Error(`${binary} is not installed: ${PACKAGES[binary] ?? `install ${binary}`}`)
              : err,
          ),
        );
        proc.once('spawn', () => resolve());
      });
      child = proc;
      await waitForRedis(url);
    },
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      const proc = child;
      child = undefined;
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill(signal);
      await exited;
    },
    pid: () => child?.pid,
  };
}
