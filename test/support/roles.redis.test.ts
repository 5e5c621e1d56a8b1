import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, runScript, type CliProcess } from './cli.js';
import { eventually, withNamespace } from './namespace.js';
import { stopAll, terminate, uncleanExits, waitForWorkers } from './roles.js';

/** A process that says `ready` once its SIGTERM handler is in place, then waits. */
function scriptProcess(dir: string, name: string, onSigterm: string): CliProcess {
  const file = join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    `process.once('SIGTERM', () => { ${onSigterm} });\n` +
      `process.stdout.write('ready\\n');\nsetInterval(() => {}, 1000);\n`,
  );
  return runScript(file, [], {});
}

async function ready(proc: CliProcess): Promise<CliProcess> {
  await eventually(() => (proc.output.stdout.includes('ready') ? true : undefined), {
    timeoutMs: 30_000,
    what: 'the script to install its SIGTERM handler',
  });
  return proc;
}

describe('stopping role processes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-roles-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('stopAll resolves when every process exits 0 on SIGTERM', async () => {
    const clean = await Promise.all(
      [1, 2].map((n) => ready(scriptProcess(dir, `clean${n}`, 'process.exit(0);'))),
    );
    await expect(stopAll(clean)).resolves.toBeUndefined();
    expect(await Promise.all(clean.map((p) => p.exited))).toEqual([0, 0]);
  });

  it('stopAll rejects when a process exits non-zero, naming it and its stderr', async () => {
    // Without REDIS_URL and AGENT_API_KEY the CLI refuses to start and exits 2.
    const proc = runCli(['worker'], {});
    expect(await proc.exited).toBe(2);
    await expect(stopAll([proc])).rejects.toThrow(
      /cli\.ts worker \(pid \d+\) exited 2: .*REDIS_URL/,
    );
  });

  it('stopAll rejects when a process ends by a signal after SIGTERM', async () => {
    const clean = await ready(scriptProcess(dir, 'fine', 'process.exit(0);'));
    const killed = await ready(scriptProcess(dir, 'dies', "process.kill(process.pid, 'SIGKILL');"));
    await expect(stopAll([clean, killed])).rejects.toThrow(
      /^1 of 2 processes did not exit 0 on SIGTERM:\ndies\.mjs \(pid \d+\) ended by SIGKILL$/,
    );
  });

  it('terminate reports every exit and uncleanExits names only the unclean ones', async () => {
    const procs = await Promise.all([
      ready(scriptProcess(dir, 'zero', 'process.exit(0);')),
      ready(scriptProcess(dir, 'three', "process.stderr.write('boom\\n'); process.exit(3);")),
    ]);
    const exits = await terminate(procs);
    expect(exits).toEqual([0, 3]);
    expect(uncleanExits(procs, exits)).toEqual([
      expect.stringMatching(/^three\.mjs \(pid \d+\) exited 3: boom$/),
    ]);
  });
});

describe('waitForWorkers', () => {
  it('fails at once, with its stderr, when a process it waits for exits', async () => {
    await withNamespace('roles', async (ns) => {
      const proc = runCli(['worker'], {});
      const started = Date.now();
      await expect(waitForWorkers(ns, 1, { processes: [proc] })).rejects.toThrow(
        /before 1 dispatch workers were up, cli\.ts worker \(pid \d+\) exited 2: .*REDIS_URL/,
      );
      expect(Date.now() - started).toBeLessThan(15_000);
    });
  });
});
