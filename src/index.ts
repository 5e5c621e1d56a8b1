/**
 * agent-dispatch's library entry: the producer and the operator controls (contract, section 4),
 * and the types of what they return and of the completion events.
 */
export { createProducer } from './producer/index.js';
export type { KeyConflict, Producer, ProducerOptions, SendResult } from './producer/index.js';
export { createAdmin } from './producer/index.js';
export type {
  Admin,
  AdminOptions,
  CancelResult,
  DeadLetter,
  DeadLetterFilter,
  FollowupDetail,
  LimitOptions,
  LimitResult,
  PauseResult,
  PlannedRedrive,
  ProjectView,
  RedriveFilter,
  RedriveOutcome,
  RedriveResult,
  UnparkResult,
} from './producer/index.js';
export type { FollowUpInput } from './dispatch/followup.js';
export type { FieldProblem } from './dispatch/followup-problems.js';
export type { CreateInput, DispatchInput } from './dispatch/creation.js';
export type { DispatchStatus } from './dispatch/status.js';
export type { DispatchState } from './dispatch/record.js';
export { EVENT_TYPES, JOB_EVENT_TYPES, type EventType } from './dispatch/event.js';
export type { DurabilitySetting } from './config/durability.js';
/** The frozen defaults of the options left out, each its setting's default (docs/library.md). */
export { LIBRARY_DEFAULTS } from './config/defaults.js';
export {
  createEventReader,
  type CompletionEvent,
  type EventReader,
  type EventReaderOptions,
} from './store/event-reader.js';
/** Every error it throws: each an `AgentDispatchError` with a stable `code` (docs/errors.md). */
export * from './errors.js';
