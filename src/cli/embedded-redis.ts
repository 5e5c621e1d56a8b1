import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import type { Logger } from '../telemetry/logger.js';
import { previousPort, recordRunning, refuseIfRunning } from './embedded-folder.js';
import { LIFECYCLE } from '../telemetry/names.js';
import { RedisServerMissingError, serverBinary } from './server-binary.js';

/**
 * The private server that `agent-dispatch start` runs when REDIS_URL is unset: `valkey-server`
 * when one is installed, else `redis-server`; loopback only, AOF on, `noeviction` as BullMQ
 * requires, and a data folder of its own that survives restarts. A server with WAITAOF (Valkey,
 * Redis 7.2+) runs `appendfsync everysec` and the roles wait for WAITAOF where it matters; one
 * without runs `appendfsync always`, so what it acknowledged is on disk either way.
 */

/** A running embedded Redis. */
export interface EmbeddedRedis {
  readonly url: string;
  /** The binary it runs, such as `valkey-server`, and its version. */
  readonly server: string;
  /** `everysec` where the server has WAITAOF, else `always`. */
  readonly appendfsync: 'always' | 'everysec';
  /** Shuts the server down (SIGTERM: Redis flushes its AOF) and waits for it to exit. Idempotent. */
  stop(): Promise<void>;
}

/** Options of {@link startEmbeddedRedis}. */
export interface EmbeddedRedisOptions {
  /** Data folder (created if missing), such as `<repo>/.data/redis`. */
  dataDir: string;
  /** @defaultValue a free loopback port */
  port?: number;
  /** @defaultValue `valkey-server` from PATH when there is one, else `redis-server` */
  binary?: string;
  logger: Logger;
}

/** Longest wait for the first PONG; replaying a large AOF takes a while. */
const READY_TIMEOUT_MS = 60_000;
/** Longest wait for a clean exit after SIGTERM before SIGKILL. */
const STOP_TIMEOUT_MS = 15_000;

/** Starts `redis-server` and resolves once it answers PING. */
export async function startEmbeddedRedis(options: EmbeddedRedisOptions): Promise<EmbeddedRedis> {
  const { binary, version, waitaof } = serverBinary(options.binary);
  const appendfsync = waitaof ? 'everysec' : 'always';
  const dir = resolve(options.dataDir);
  mkdirSync(dir, { recursive: true });
  await refuseIfRunning(dir);
  const port = options.port ?? (await previousPort(dir)) ?? (await freePort());
  const logger = options.logger.child({ redisPort: port });
  const { child, recentOutput } = await launch(binary, port, dir, appendfsync);
  const url = `redis://127.0.0.1:${port}`;
  // A normal exit of this process, even a crash, takes the server with it; only SIGKILL leaves it,
  // and the pidfile check above catches that on the next start.
  const killOnExit = () => child.kill('SIGTERM');
  process.once('exit', killOnExit);
  let stopping: Promise<void> | undefined;
  let ready = false;
  const stopped = new Promise<void>((done) =>
    child.once('exit', (code, signal) => {
      if (ready && !stopping)
        logger.error(
          { code, signal, output: recentOutput.slice(-5) },
          LIFECYCLE.embeddedRedisExited,
        );
      done();
    }),
  );
  const stop = () => {
    stopping ??= stopChild(child, stopped).finally(() => process.off('exit', killOnExit));
    return stopping;
  };
  try {
    await waitUntilReady(url, child.pid, stopped, recentOutput);
    ready = true;
  } catch (err) {
    await stop();
    throw err;
  }
  const server = `${binary} ${version}`;
  recordRunning(dir, port, stopped);
  logger.info({ dir, pid: child.pid, server, appendfsync }, LIFECYCLE.embeddedRedisStarted);
  return { url, server, appendfsync, stop };
}

/**
 * Redis's `hash-max-listpack-value` that the servers we ship (this one, docker-compose.yml) run
 * with: a hash whose every value is at most this long is kept as a compact listpack. From
 * MARK_SENT on, a follow-up's record holds the agent job's last snapshot, a few hundred bytes of
 * JSON: at Redis's default of 64 the record becomes a hashtable, kept for `DISPATCH_RETENTION`
 * after the event; at 512 it stays a listpack, a fraction of that size, unless its `meta` is
 * longer. Our hashes hold a few dozen short fields at most, so a listpack lookup stays short.
 */
export const LISTPACK_VALUE_BYTES = 512;

/** A started server process and its last log lines (for the error when it dies during start). */
interface Launched {
  readonly child: ChildProcess;
  readonly recentOutput: string[];
}

function launch(
  binary: string,
  port: number,
  dir: string,
  appendfsync: 'always' | 'everysec',
): Promise<Launched> {
  const args = [
    ...['--port', String(port), '--bind', '127.0.0.1', '--dir', dir],
    ...['--appendonly', 'yes', '--appendfsync', appendfsync, '--save', ''],
    ...[
      '--maxmemory-policy',
      'noeviction',
      '--hash-max-listpack-value',
      String(LISTPACK_VALUE_BYTES),
      '--pidfile',
      join(dir, 'redis.pid'),
      '--daemonize',
      'no',
    ],
  ];
  // Its own process group: Ctrl-C in a terminal must reach only us, so the server outlives our
  // graceful shutdown (in-flight sends still write to it) and is stopped last.
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const recentOutput: string[] = [];
  const keep = (chunk: Buffer) => {
    recentOutput.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    recentOutput.splice(0, recentOutput.length - 20);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return new Promise((resolveChild, reject) => {
    child.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'ENOENT' ? new RedisServerMissingError(binary) : err),
    );
    child.once('spawn', () => resolveChild({ child, recentOutput }));
  });
}

/**
 * Polls until our server answers; fails early, with the server's last log lines, if it exits. The
 * answer must come from our process: on a busy port another Redis would answer in its place.
 */
async function waitUntilReady(
  url: string,
  pid: number | undefined,
  stopped: Promise<void>,
  recentOutput: string[],
): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let exited = false;
  void stopped.then(() => (exited = true));
  while (!exited) {
    const client = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      const info = await client.info('server');
      if (new RegExp(`^process_id:${pid}\\s*$`, 'm').test(info)) return;
    } catch {
      // Not listening yet, or still loading the AOF (LOADING error): try again shortly.
    } finally {
      client.disconnect();
    }
    if (Date.now() > deadline)
      throw new Error(`the private Redis server did not answer PING within ${READY_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `the private Redis server exited during start:\n${recentOutput.slice(-10).join('\n')}`,
  );
}

async function stopChild(child: ChildProcess, stopped: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await stopped;
  clearTimeout(timer);
}

/**
 * Asks the kernel for a free loopback TCP port (listen on port 0, read it, close). The tests and
 * the bench use this one too.
 */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}
