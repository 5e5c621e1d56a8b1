export {
  createProducer,
  IdempotencyConflictError,
  InvalidFollowUpError,
  RedisUnavailableError,
} from './producer.js';
export type { Producer, ProducerOptions, SendResult } from './producer.js';
export { conflictProblem, RedisCommandError, type KeyConflict } from './errors.js';
export { BacklogFullError } from './backlog.js';
export { adminFor, createAdmin } from './admin.js';
export type {
  Admin,
  AdminOptions,
  LimitOptions,
  LimitResult,
  PauseResult,
  UnparkResult,
} from './admin-api.js';
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
  type NotRedrivableWhy,
  type PlannedRedrive,
  type RedriveOutcome,
  type RedriveResult,
} from './redrive.js';
export type { DeadLetterFilter } from './followup-lookup.js';
export {
  REDRIVE_DEFAULT_LIMIT,
  REDRIVE_LIMIT_MAX,
  redriveFilterSchema,
  type RedriveFilter,
} from './redrive-filter.js';
export type { DeadLetter, FollowupDetail } from '../store/store.js';
