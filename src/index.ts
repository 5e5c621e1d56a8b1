/**
 * agent-dispatch's library entry: the producer and the operator controls (contract, section 4),
 * and the types of what they return and of the completion events.
 */
export {
  createProducer,
  IdempotencyConflictError,
  InvalidFollowUpError,
  RedisUnavailableError,
} from './producer/index.js';
export type { KeyConflict, Producer, ProducerOptions, SendResult } from './producer/index.js';
export {
  createAdmin,
  InvalidControlError,
  NotCancellableError,
  UnknownDispatchError,
} from './producer/index.js';
export type {
  Admin,
  AdminOptions,
  CancelResult,
  LimitOptions,
  LimitResult,
  PauseResult,
  ProjectView,
  UnparkResult,
} from './producer/index.js';
export type { FollowUpInput, FieldProblem } from './dispatch/followup.js';
export type { DispatchStatus } from './dispatch/status.js';
export type { DispatchState } from './dispatch/record.js';
export { EVENT_TYPES, type EventType } from './dispatch/event.js';
export { NotDurableError } from './redis/disk-wait.js';
export type { DurabilitySetting } from './redis/durability.js';
export {
  createEventReader,
  type CompletionEvent,
  type EventReader,
  type EventReaderOptions,
} from './dispatch/event-reader.js';
export { LayoutError } from './redis/layout.js';
