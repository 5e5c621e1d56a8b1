import type { SettingProblem } from './errors.js';
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * The agent-API key read from `AGENT_API_KEY_FILE` (the Docker and Kubernetes secret convention),
 * and kept fresh: read again on SIGHUP, when the file changes, and whenever a caller asks (before
 * each probe of a paused fleet). No message here ever contains the file's content.
 */

/** The setting whose file holds the key: every message names it. */
const SETTING = 'AGENT_API_KEY_FILE';

/** Bearer keys are token68 characters in practice; anything else would break the header. */
const KEY_SHAPE = /^[\x21-\x7e]+$/;

/** Changes of one file arrive as a burst of events (write, rename, a symlink swap): wait for calm. */
const SETTLE_MS = 100;

/** The key file could not give a key: unreadable, empty, or not a key. The message names the setting. */
export class KeyFileError extends AgentDispatchError {
  readonly code = 'bad_key_file';
  constructor(message: string, options?: { cause: unknown }) {
    super(`${SETTING}: ${message}`, options);
    this.name = 'KeyFileError';
  }
}

/** Reads the key from `path`: its content without surrounding whitespace. Throws {@link KeyFileError}. */
export function readKeyFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new KeyFileError(`cannot read the file (${typeof code === 'string' ? code : 'error'})`, {
      cause: err,
    });
  }
  const key = text.trim();
  if (key === '') throw new KeyFileError('the file is empty');
  if (!KEY_SHAPE.test(key)) {
    throw new KeyFileError('the key must be one word of visible ASCII characters');
  }
  return key;
}

/** What {@link watchKeyFile} reports to. */
export interface KeyFileListener {
  /** A new key was read (not called when the file still holds the same key). */
  onKey(key: string): void;
  /** The file could not be read again; the key in use stays. */
  onError(err: KeyFileError): void;
}

/** A watched key file. */
export interface KeyFileWatcher {
  /** Reads the file again now; resolves to whether the key changed. Never throws. */
  refresh(): boolean;
  /** Stops watching and listening for SIGHUP. */
  close(): void;
}

/**
 * Watches the key file at `path`, whose current content is `current`. The folder is watched, not
 * the file: Kubernetes updates a secret by swapping a symlink in the folder, which a watch of the
 * old file would never see.
 */
export function watchKeyFile(
  path: string,
  current: string,
  listener: KeyFileListener,
): KeyFileWatcher {
  let key = current;
  let timer: NodeJS.Timeout | undefined;
  const refresh = (): boolean => {
    try {
      const next = readKeyFile(path);
      if (next === key) return false;
      key = next;
      listener.onKey(next);
      return true;
    } catch (err) {
      listener.onError(err as KeyFileError);
      return false;
    }
  };
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(refresh, SETTLE_MS);
    timer.unref();
  };
  let watcher: FSWatcher | undefined;
  try {
    // Kubernetes renames `..data`, not the file itself: any change in the folder may be ours, and
    // reading the file again is cheap (nothing happens unless the key changed).
    watcher = watch(dirname(path), { persistent: false }, soon);
    watcher.on('error', () => {
      // The folder went away: SIGHUP and the refresh before each probe still read the file.
    });
  } catch {
    // Watching is not possible here (some file systems): SIGHUP and probes still read the file.
  }
  const onHangup = () => refresh();
  process.on('SIGHUP', onHangup);
  return {
    refresh,
    close() {
      clearTimeout(timer);
      watcher?.close();
      process.off('SIGHUP', onHangup);
    },
  };
}

/** The key: `AGENT_API_KEY`, or the content of `AGENT_API_KEY_FILE`; never both. */
export function keyOf(
  parsed: Readonly<Record<string, unknown>>,
  problems: SettingProblem[],
): string | undefined {
  const key = parsed.AGENT_API_KEY as string | undefined;
  const file = parsed.AGENT_API_KEY_FILE as string | undefined;
  if (file === undefined) return key;
  if (key !== undefined) {
    problems.push({
      setting: 'AGENT_API_KEY_FILE',
      message: 'set AGENT_API_KEY or AGENT_API_KEY_FILE, not both',
    });
    return undefined;
  }
  try {
    return readKeyFile(file);
  } catch (err) {
    if (!(err instanceof KeyFileError)) throw err;
    problems.push({
      setting: 'AGENT_API_KEY_FILE',
      message: err.message.replace(/^AGENT_API_KEY_FILE: /, ''),
    });
    return undefined;
  }
}
