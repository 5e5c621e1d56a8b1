import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';

/**
 * What the embedded Redis of `agent-dispatch start` leaves in its data folder besides its data:
 * the pidfile (written by the server), the running server's URL and the last server's port. A
 * second `start` on the folder refuses while the server lives; the CLI's other commands find the
 * demo's Redis by its URL; the next `start` takes the same port again, so the URL stays put.
 */

/** Where `start` keeps its private Redis's data, relative to where it runs: git ignores `.data/`. */
export const DEMO_DATA_DIR = '.data/redis';

/** The files beside the data that hold the running server's URL and the last server's port. */
const URL_FILE = 'redis.url';
const PORT_FILE = 'redis.port';

/**
 * The URL of the embedded Redis that a running `agent-dispatch start` keeps in `dataDir`, or
 * undefined when none runs there. Lets `status`, `events` and the other commands find the demo's
 * Redis without REDIS_URL.
 */
export function runningEmbeddedRedisUrl(dataDir: string): string | undefined {
  const dir = resolve(dataDir);
  if (livePid(dir) === undefined) return undefined;
  try {
    const url = readFileSync(join(dir, URL_FILE), 'utf8').trim();
    return /^redis:\/\/127\.0\.0\.1:\d+$/.test(url) ? url : undefined;
  } catch {
    return undefined;
  }
}

/** The port the last server of `dir` had, if it is free now: the demo's URL stays the same. */
export async function previousPort(dir: string): Promise<number | undefined> {
  let port: number;
  try {
    port = Number(readFileSync(join(dir, PORT_FILE), 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!Number.isSafeInteger(port) || port <= 0 || port > 65_535) return undefined;
  return (await portIsFree(port)) ? port : undefined;
}

/** The pid of a live Redis server that uses `dir`, from its pidfile. */
function livePid(dir: string): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(join(dir, 'redis.pid'), 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!Number.isSafeInteger(pid) || pid <= 0 || !isAlive(pid) || !looksLikeRedis(pid))
    return undefined;
  return pid;
}

/** Refuses a data folder that a live redis-server still uses: two servers would corrupt its AOF. */
export async function refuseIfRunning(dir: string): Promise<void> {
  const pid = livePid(dir);
  if (pid === undefined) return;
  throw new Error(
    `a Redis server (pid ${pid}) is still using ${dir}: another \`agent-dispatch start\` is running, ` +
      `or one was killed. Stop it (kill ${pid}) or set REDIS_URL.`,
  );
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** After a reboot the pid may belong to anything; where /proc exists, check its name. */
function looksLikeRedis(pid: number): boolean {
  try {
    return /redis|valkey/.test(readFileSync(`/proc/${pid}/comm`, 'utf8'));
  } catch {
    return true;
  }
}

/** Notes a started server's URL and port in `dir`; the URL goes when the server stops. */
export function recordRunning(dir: string, port: number, stopped: Promise<void>): void {
  writeFileSync(join(dir, URL_FILE), `redis://127.0.0.1:${port}\n`);
  writeFileSync(join(dir, PORT_FILE), `${port}\n`);
  void stopped.then(() => rmSync(join(dir, URL_FILE), { force: true }));
}

/** Whether `port` on loopback can be listened on now. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((answer) => {
    const server = createServer();
    server.unref();
    server.once('error', () => answer(false));
    server.listen(port, '127.0.0.1', () => server.close(() => answer(true)));
  });
}
