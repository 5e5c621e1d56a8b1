/**
 * Every error agent-dispatch throws, in one list: each extends {@link AgentDispatchError} and has
 * a stable `code` of its own (docs/errors.md). Each class stays beside the code that throws it;
 * this module only gathers them, and `src/index.ts` exports it.
 */
export { AgentDispatchError } from './agent-dispatch-error.js';
export { ConfigError } from './config/errors.js';
export { KeyFileError } from './config/key-file.js';
export { RedisAddressError } from './config/redis-address.js';
export { RedisServerMissingError } from './cli/errors.js';
export { LayoutError } from './redis/layout.js';
export { NotDurableError } from './redis/disk-wait.js';
export { InvalidFollowUpError } from './dispatch/followup-problems.js';
export { StoreItemError } from './store/call-batch.js';
export { CursorError } from './store/event-pages.js';
export { CursorGapError } from './store/event-gaps.js';
export {
  IdempotencyConflictError,
  RedisCommandError,
  RedisUnavailableError,
} from './producer/errors.js';
export { ClaimReleasedError } from './producer/claims.js';
export { BacklogFullError } from './producer/backlog.js';
export {
  InvalidControlError,
  NotCancellableError,
  UnknownDispatchError,
} from './producer/controls.js';
export { NotRedrivableError } from './producer/redrive.js';
export { AgentApiError, type AgentErrorCode } from './agent-api/errors.js';
export { ResponseTooLargeError, WriteDeadlineError } from './agent-api/transport-errors.js';
export { InvalidWebhookError } from './webhooks/errors.js';
export { WebhookAttemptError } from './webhooks/errors.js';
export { UsageError } from './cli/errors.js';
