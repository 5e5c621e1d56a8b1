/**
 * The one HTTP client of the agent API: its endpoints, the agent-job schema and the error type.
 * Roles import from here only.
 */
export {
  AgentApiClient,
  DEFAULT_CONNECTIONS,
  type AgentApiClientOptions,
  type CallOptions,
} from './client.js';
export {
  AGENT_ERROR_CODES,
  AgentApiError,
  configRejectionStatus,
  describeError,
  isAgentApiError,
  type AgentApiErrorDetails,
  type AgentErrorCode,
  type ErrorDescription,
} from './errors.js';
export { retryAfterMsOf } from './errors.js';
export { MAX_RESPONSE_BYTES, WriteDeadlineError } from './exchange.js';
export {
  JOB_STATUSES,
  TERMINAL_STATUSES,
  agentJobSchema,
  isTerminalStatus,
  jobSourceSchema,
  statusKind,
  type AgentJob,
  type JobStatus,
  type TerminalStatus,
} from './job.js';
