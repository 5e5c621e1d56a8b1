import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * The CLI's errors, in a module that imports nothing heavy: the library's entry exports them
 * (src/errors.ts) without loading the commands.
 */

/** Thrown by a command for bad usage; the CLI prints the message and exits 2. */
export class UsageError extends AgentDispatchError {
  readonly code = 'usage';
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Thrown when no `redis-server` binary can be started. Code `redis_server_missing`. */
export class RedisServerMissingError extends AgentDispatchError {
  readonly code = 'redis_server_missing';
  constructor(binary: string) {
    super(
      `${binary} was not found. \`agent-dispatch start\` without REDIS_URL runs a private Redis: ` +
        'install one (`apt-get install valkey-server` or `apt-get install redis-server`, or ' +
        '`brew install valkey`), or run ' +
        '`docker compose up redis` and set REDIS_URL=redis://127.0.0.1:6379.',
    );
    this.name = 'RedisServerMissingError';
    // An operator's mistake, not a bug: the message is the whole story.
    this.stack = `${this.name}: ${this.message}`;
  }
}
