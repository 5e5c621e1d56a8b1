import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  loadConfig,
  readKeyFile,
  watchKeyFile,
  type KeyFileError,
} from '../../src/config/index.js';
import { eventually } from '../support/namespace.js';

const KEY = 'sk-file-key-0123456789';

describe('AGENT_API_KEY_FILE', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-dispatch-keyfile-'));
    file = join(dir, 'key');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const problemsOf = (env: Record<string, string>) => {
    try {
      loadConfig(env, {}, { required: ['AGENT_API_KEY'] });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).message;
    }
    throw new Error('expected a ConfigError');
  };

  it('gives the key, trimmed, and satisfies a command that requires AGENT_API_KEY', () => {
    writeFileSync(file, `  ${KEY}\n`);
    const config = loadConfig({ AGENT_API_KEY_FILE: file }, {}, { required: ['AGENT_API_KEY'] });
    expect(config.agentApiKey).toBe(KEY);
    expect(config.agentApiKeyFile).toBe(file);
  });

  it('is a bad setting together with AGENT_API_KEY, or when empty, unreadable or not a key; never echoing it', () => {
    writeFileSync(file, KEY);
    expect(problemsOf({ AGENT_API_KEY_FILE: file, AGENT_API_KEY: 'other-key' })).toBe(
      'AGENT_API_KEY_FILE: set AGENT_API_KEY or AGENT_API_KEY_FILE, not both',
    );
    writeFileSync(file, ' \n');
    expect(problemsOf({ AGENT_API_KEY_FILE: file })).toBe('AGENT_API_KEY_FILE: the file is empty');
    expect(problemsOf({ AGENT_API_KEY_FILE: join(dir, 'missing') })).toBe(
      'AGENT_API_KEY_FILE: cannot read the file (ENOENT)',
    );
    writeFileSync(file, 'two words-secret-part');
    const message = problemsOf({ AGENT_API_KEY_FILE: file });
    expect(message).toMatch(/^AGENT_API_KEY_FILE: the key must be/);
    expect(message).not.toContain('secret-part');
    expect(problemsOf({})).toBe(
      'AGENT_API_KEY: is required (or AGENT_API_KEY_FILE, a file holding it)',
    );
  });

  it('is read again when the file changes, through a symlink swap, and on SIGHUP', async () => {
    // The Kubernetes layout: key -> ..data/key, and ..data a symlink swapped to a new folder.
    const write = (folder: string, key: string) => {
      mkdirSync(join(dir, folder));
      writeFileSync(join(dir, folder, 'key'), key);
    };
    const seen: string[] = [];
    const errors: KeyFileError[] = [];
    write('v1', KEY);
    symlinkSync('v1', join(dir, '..data'));
    symlinkSync(join('..data', 'key'), file);
    expect(readKeyFile(file)).toBe(KEY);
    const watcher = watchKeyFile(file, KEY, {
      onKey: (key) => seen.push(key),
      onError: (err) => errors.push(err),
    });
    try {
      write('v2', 'sk-second-key');
      symlinkSync('v2', join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      await eventually(() => (seen.length === 1 ? true : undefined), {
        timeoutMs: 5_000,
        what: 'the swapped key to be read',
      });
      expect(seen).toEqual(['sk-second-key']);

      // SIGHUP reads it at once, before any watch event could.
      writeFileSync(join(dir, 'v2', 'key'), 'sk-third-key');
      process.emit('SIGHUP', 'SIGHUP');
      expect(seen).toEqual(['sk-second-key', 'sk-third-key']);
      // Reading the same key again changes nothing; an empty file keeps the key in use.
      expect(watcher.refresh()).toBe(false);
      writeFileSync(join(dir, 'v2', 'key'), '');
      expect(watcher.refresh()).toBe(false);
      expect(errors.map((e) => e.message)).toContain('AGENT_API_KEY_FILE: the file is empty');
    } finally {
      watcher.close();
    }
    expect(process.listenerCount('SIGHUP')).toBe(0);
  });
});
