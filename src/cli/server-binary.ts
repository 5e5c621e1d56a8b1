import { spawnSync } from 'node:child_process';
export { RedisServerMissingError } from './errors.js';

/** Which server binary the private Redis of `start` runs, and the error when there is none. */

/** The server binaries `start` may run, in order of preference (Valkey has WAITAOF). */
const BINARIES = ['valkey-server', 'redis-server'] as const;

/**
 * The binary to run (`given`, or the first of {@link BINARIES} installed), its version, and whether
 * it has WAITAOF. A binary that does not answer `--version` is left to fail at launch.
 */
export function serverBinary(given: string | undefined): {
  binary: string;
  version: string;
  waitaof: boolean;
} {
  const candidates = given ? [given] : BINARIES;
  for (const binary of candidates) {
    const run = spawnSync(binary, ['--version'], { encoding: 'utf8', timeout: 10_000 });
    if (run.error) continue;
    const version = /\bv=(\d+)\.(\d+)\.\d+/.exec(run.stdout ?? '');
    const [major, minor] = [Number(version?.[1] ?? 0), Number(version?.[2] ?? 0)];
    const valkey = /valkey/i.test(run.stdout ?? '');
    return {
      binary,
      version: version?.[0].slice(2) ?? 'unknown',
      waitaof: valkey || major > 7 || (major === 7 && minor >= 2),
    };
  }
  return { binary: candidates.at(-1) ?? 'redis-server', version: 'unknown', waitaof: false };
}
