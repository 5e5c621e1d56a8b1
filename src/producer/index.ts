export {
  createProducer,
  IdempotencyConflictError,
  InvalidFollowUpError,
  RedisUnavailableError,
} from './producer.js';
export type { Producer, ProducerOptions, SendResult } from './producer.js';
export type { KeyConflict } from './errors.js';
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
