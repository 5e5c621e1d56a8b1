import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = (name: string) => join(ROOT, 'node_modules', '.bin', name);

/**
 * The package as a user gets it: `npm pack` of the built `dist/`, installed into an empty project
 * (its dependencies from the npm cache that `npm ci` filled, else the registry).
 */
describe('the packed package, installed into an empty project', () => {
  let project = '';

  beforeAll(async () => {
    expect(existsSync(join(ROOT, 'dist', 'index.js')), 'dist/ is built by npm ci').toBe(true);
    project = mkdtempSync(join(tmpdir(), 'agent-dispatch-install-'));
    const packed = await run('npm', ['pack', '--ignore-scripts', '--pack-destination', project], {
      cwd: ROOT,
    });
    const tarball = packed.stdout.trim().split('\n').at(-1) ?? '';
    expect(tarball).toMatch(/^agent-dispatch-\d+\.\d+\.\d+\.tgz$/);
    writeFileSync(join(project, 'package.json'), '{"name":"user","private":true,"type":"module"}');
    await run(
      'npm',
      [
        'install',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        '--ignore-scripts',
        `./${tarball}`,
      ],
      { cwd: project, timeout: 240_000 },
    );
  }, 300_000);

  afterAll(() => {
    if (project) rmSync(project, { recursive: true, force: true });
  });

  it('imports createProducer with its types', async () => {
    writeFileSync(
      join(project, 'use.ts'),
      [
        "import { createProducer, type FollowUpInput } from 'agent-dispatch';",
        "const input: FollowUpInput = { projectId: 'p', jobId: 'j', prompt: 'hi' };",
        'export const make: typeof createProducer = createProducer;',
        'export default input;',
      ].join('\n'),
    );
    const tsc = await run(
      BIN('tsc'),
      [
        '--noEmit',
        '--strict',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--target',
        'es2022',
        '--skipLibCheck',
        '--typeRoots',
        join(ROOT, 'node_modules', '@types'),
        '--types',
        'node',
        'use.ts',
      ],
      { cwd: project },
    ).catch((err: { stdout?: string }) => ({ stdout: `tsc failed: ${err.stdout ?? ''}` }));
    expect(tsc.stdout).toBe('');

    const loaded = await run(
      'node',
      [
        '--input-type=module',
        '-e',
        "import('agent-dispatch').then((m) => console.log(typeof m.createProducer))",
      ],
      { cwd: project },
    );
    expect(loaded.stdout.trim()).toBe('function');
  });

  it('ships the Lua scripts the store loads at start', () => {
    // Every script and include of src/store, where the store's loader looks for them, and no other.
    const lua = (root: string) =>
      readdirSync(root, { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.lua'))
        .sort();
    const installed = join(project, 'node_modules', 'agent-dispatch', 'dist');
    expect(lua(join(installed, 'store'))).toEqual(lua('src/store'));
    expect(lua(installed)).toEqual(lua('src/store').map((f) => join('store', f)));
  });

  it('runs npx agent-dispatch --help', async () => {
    const help = await run('npx', ['--no-install', 'agent-dispatch', '--help'], { cwd: project });
    expect(help.stdout).toMatch(/^agent-dispatch: delivers follow-up prompts/);
    expect(help.stdout).toContain('Commands:');
  });
});
