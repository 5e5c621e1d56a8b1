export {
  createProducer,
  IdempotencyConflictError,
  InvalidFollowUpError,
  RedisUnavailableError,
} from './producer.js';
export type { Producer, ProducerOptions, SendResult } from './producer.js';
export { RedisCommandError, type KeyConflict } from './errors.js';
export { adminFor, createAdmin } from './admin.js';
export type {
  Admin,
  AdminOptions,
  LimitOptions,
  LimitResult,
  PauseResult,
  UnparkResult,
} from './admin.js';
export {
  InvalidControlError,
  NotCancellableError,
  UnknownDispatchError,
  type CancelResult,
  type ProjectView,
} from './controls.js';
export type { Overview, OverviewOptions, QueuedView } from './overview.js';
export {
  NotRedrivableError,
  redriveKey,
  type DeadLetterFilter,
  type NotRedrivableWhy,
  type RedriveResult,
} from './redrive.js';
export type { DeadLetter, FollowupDetail } from '../store/store.js';
