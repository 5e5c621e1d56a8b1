/**
 * The one HTTP client of the agent API: its endpoints and the agent-job schema (`client.ts`), its
 * options (`options.ts`), the error type (`errors.ts`) and the transport's errors
 * (`transport-errors.ts`). Roles import from here only.
 */
export {
  AgentApiClient,
  JOB_STATUSES,
  TERMINAL_STATUSES,
  agentJobSchema,
  isTerminalStatus,
  jobSourceSchema,
  statusKind,
  type AgentJob,
  type JobStatus,
  type TerminalStatus,
} from './client.js';
export { DEFAULT_CONNECTIONS, type AgentApiClientOptions, type CallOptions } from './options.js';
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
export { MAX_RESPONSE_BYTES, WriteDeadlineError } from './transport-errors.js';
