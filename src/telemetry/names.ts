/**
 * Names defined once: log fields, lifecycle events (`noun:verb`, used as log messages) and metric
 * names. The completion-event types of the contract's section 5 are in `dispatch/event.ts`.
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
  /** A follow-up ended with its one event. */
  followupFinished: 'followup:finished',
  /** A send failed for good (refused, or attempts spent): it ends undeliverable. */
  followupSendFailed: 'followup:send-failed',
  /** Ending a follow-up whose BullMQ job failed for good did not work (Redis failed). */
  followupEndFailed: 'followup:end-failed',
  followupUnknownStatus: 'followup:unknown-status',
  followupPoison: 'followup:poison',
  /**
   * A worker held a job with no record that Redis no longer holds either (its enqueue was lost
   * in a crash, the producer refused), or whose follow-up was registered again: no event.
   */
  followupVanished: 'followup:vanished',
  followupRepaired: 'followup:repaired',
  /** Redis did not confirm a send's intent on disk: it is queued again, nothing was sent. */
  followupNotDurable: 'followup:not-durable',
  /** A send's budget grant was too old to be written: given back unsent, acquired again. */
  followupRegrant: 'followup:regrant',
  projectParked: 'project:parked',
  concurrencyChanged: 'concurrency:changed',
  pollTick: 'poll:tick',
  pollSkipped: 'poll:skipped',
  pollError: 'poll:error',
  /** The tick Worker took no tick while ticks fell due: forced closed and made again. */
  pollWorkerRestarted: 'poll:worker-restarted',
  redisError: 'redis:error',
  /** Redis answers again after an outage that was reported. */
  redisReady: 'redis:ready',
  sendsPaused: 'sends:paused',
  sendsResumed: 'sends:resumed',
  apiKeyReloaded: 'api-key:reloaded',
  apiKeyUnreadable: 'api-key:unreadable',
  httpListening: 'http:listening',
  /** One HTTP request answered (debug). */
  httpRequest: 'http:request',
  /** An HTTP request failed unexpectedly: answered 500. */
  httpError: 'http:error',
  /** The intake could not reach Redis: answered 503. */
  intakeUnavailable: 'intake:unavailable',
  /** The intake failed unexpectedly: answered 500. */
  intakeError: 'intake:error',
  /** A Redis read for the metrics scrape failed or timed out; the gauge is left out. */
  metricsScrapeFailed: 'metrics:scrape-failed',
  /** One agent-API call answered (debug). */
  agentApiCall: 'agent-api:call',
  /** One agent-API call failed (debug; the caller logs what it means). */
  agentApiCallFailed: 'agent-api:call-failed',
  /** The private redis-server of `start` is up. */
  embeddedRedisStarted: 'redis:embedded-started',
  /** The private redis-server of `start` exited on its own. */
  embeddedRedisExited: 'redis:embedded-exited',
  /** The bundled agent-API simulator listens. */
  simulatorListening: 'simulator:listening',
  /** The simulator answered one request (debug). */
  simulatorRequest: 'simulator:request',
  simulatorStopped: 'simulator:stopped',
  /** A step of an ordered shutdown failed; the later steps still run. */
  shutdownStepFailed: 'shutdown:step-failed',
  /** An ordered shutdown hit its deadline; what is left is abandoned. */
  shutdownDeadline: 'shutdown:deadline',
  configClearTextKey: 'config:clear-text-key',
  /** The OpenTelemetry SDK exports this process's spans (OTEL_TRACES_EXPORTER). */
  tracingStarted: 'tracing:started',
  /** A role process could not renew its heartbeat: it may count as dead until Redis answers. */
  heartbeatFailed: 'heartbeat:failed',
  /** The start-up check: Redis cannot keep what it acknowledged as REDIS_DURABILITY asks. */
  redisNotDurable: 'redis:not-durable',
  /** The start-up check: the server keeps a sent follow-up's record as a hashtable, not compact. */
  redisRecordsNotCompact: 'redis:records-not-compact',
  /** One follow-up's keys or stored values are broken: its store write failed alone; it waits. */
  storeItemError: 'store:item-error',
} as const;

/** Metric names, defined once. Every name starts with `agent_dispatch_`. */
export const METRIC_NAMES = {
  sends: 'agent_dispatch_sends_total',
  apiLatency: 'agent_dispatch_api_request_duration_seconds',
  budgetWait: 'agent_dispatch_budget_wait_seconds',
  eventsPublished: 'agent_dispatch_events_published_total',
  statusReads: 'agent_dispatch_status_reads_total',
  inFlightLimit: 'agent_dispatch_worker_inflight_limit',
  inFlight: 'agent_dispatch_worker_inflight',
  pollTicks: 'agent_dispatch_poll_ticks_total',
  queueJobs: 'agent_dispatch_queue_jobs',
  trackedFollowups: 'agent_dispatch_tracked_followups',
  projectSends: 'agent_dispatch_project_sends_total',
  projectParkedUntil: 'agent_dispatch_project_parked_until_timestamp_seconds',
  rateLimitMax: 'agent_dispatch_send_rate_limit_max',
  rateLimitWindow: 'agent_dispatch_send_rate_limit_window_seconds',
  /** A project's own send limit (`project limit`), per project that has one. */
  projectLimitMax: 'agent_dispatch_project_send_limit_max',
  projectLimitWindow: 'agent_dispatch_project_send_limit_window_seconds',
  /** From an agent run's end (as well as the reads tell it) to its completion event. */
  runEndToEvent: 'agent_dispatch_run_end_to_event_seconds',
  pollLag: 'agent_dispatch_poll_lag_seconds',
  redisUp: 'agent_dispatch_redis_up',
  repairs: 'agent_dispatch_repairs_total',
  /** How long the last complete pass of the repair sweep took. */
  repairPassSeconds: 'agent_dispatch_repair_pass_seconds',
  /** When the last complete pass of the repair sweep ended. */
  repairPassEnded: 'agent_dispatch_repair_pass_ended_timestamp_seconds',
  authPaused: 'agent_dispatch_api_auth_paused',
  liveProcesses: 'agent_dispatch_live_processes',
  oldestQueuedAge: 'agent_dispatch_oldest_queued_age_seconds',
  projectPausedSince: 'agent_dispatch_project_paused_since_timestamp_seconds',
  storeItemErrors: 'agent_dispatch_store_item_errors_total',
} as const;

/** Span names (OpenTelemetry messaging conventions: `{operation} {destination}`). */
export const SPAN_NAMES = {
  send: 'send dispatch',
  process: 'process dispatch',
  settle: 'settle dispatch',
} as const;

/** Span attribute names beyond the stable ones `@opentelemetry/semantic-conventions` exports. */
export const SPAN_ATTRIBUTES = {
  messagingSystem: 'messaging.system',
  destination: 'messaging.destination.name',
  operationType: 'messaging.operation.type',
  operationName: 'messaging.operation.name',
  messageId: 'messaging.message.id',
  urlTemplate: 'url.template',
  /** The BullMQ attempt a worker run is (1 for the first). */
  attempt: 'agent_dispatch.attempt',
  /** What a worker run came to: `sent`, `parked`, `undeliverable: ...`. */
  outcome: 'agent_dispatch.outcome',
  /** The completion event's `type`, on `settle dispatch`. */
  eventType: 'agent_dispatch.event.type',
} as const;

/** Webhook deliveries: their log events and metric names. */
export const WEBHOOK_NAMES = {
  /** The deliverer of a process started (poller and start). */
  started: 'webhooks:started',
  /** One event was delivered to one subscription (debug). */
  delivered: 'webhook:delivered',
  /** One attempt failed; it is retried after its backoff (info). */
  failed: 'webhook:failed',
  /** A delivery ran out of WEBHOOK_MAX_AGE: dead-lettered until `webhook redrive`. */
  dead: 'webhook:dead',
  /** A receiver answered 410 Gone: its subscription is disabled. */
  disabled: 'webhook:disabled',
  /** A round of the fan-out of a shard's events failed; it is tried again. */
  fanOutError: 'webhook:fan-out-error',
  /** Deliveries by outcome: delivered, failed (an attempt), dead, gone. */
  deliveriesMetric: 'agent_dispatch_webhook_deliveries_total',
  /** Age of the oldest delivery not delivered yet (dead letters excluded). */
  oldestMetric: 'agent_dispatch_webhook_oldest_undelivered_seconds',
} as const;
