/**
 * Names defined once: log fields and lifecycle events (`noun:verb`, used as log messages). The
 * completion-event types of the contract's section 5 are in `dispatch/event.ts`.
 */

/** Log field names used for context in child loggers. */
export const LOG_FIELDS = {
  role: 'role',
  dispatchId: 'dispatchId',
  projectId: 'projectId',
  jobId: 'jobId',
  err: 'err',
} as const;

/** Lifecycle events, used as the constant message of a log line. */
export const LIFECYCLE = {
  roleStarted: 'role:started',
  roleStopping: 'role:stopping',
  roleStopped: 'role:stopped',
  followupEnqueued: 'followup:enqueued',
  followupBlocked: 'followup:blocked',
  followupBudgetWait: 'followup:budget-wait',
  followupParked: 'followup:parked',
  followupSent: 'followup:sent',
  followupRetry: 'followup:retry',
  followupAmbiguous: 'followup:ambiguous',
  /** A send's outcome could not be recorded (Redis failed), or another attempt holds it. */
  followupUnrecorded: 'followup:unrecorded',
  followupFinished: 'followup:finished',
  followupUnknownStatus: 'followup:unknown-status',
  followupPoison: 'followup:poison',
  followupRepaired: 'followup:repaired',
  projectParked: 'project:parked',
  concurrencyChanged: 'concurrency:changed',
  pollTick: 'poll:tick',
  pollSkipped: 'poll:skipped',
  pollError: 'poll:error',
  redisError: 'redis:error',
  sendsPaused: 'sends:paused',
  sendsResumed: 'sends:resumed',
  apiKeyReloaded: 'api-key:reloaded',
  apiKeyUnreadable: 'api-key:unreadable',
  httpListening: 'http:listening',
  configClearTextKey: 'config:clear-text-key',
} as const;
