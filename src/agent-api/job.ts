import { z } from 'zod';

/**
 * The agent job as the vendor's OpenAPI document describes it (`components.schemas.AgentJob`).
 *
 * The document marks no field required, so none is required here. Unknown fields are tolerated
 * and dropped (`z.object` strips them), also inside `source`: the job is stored in the dispatch
 * record and echoed in the completion event, so only the contract's fields may reach Redis, never
 * whatever else a server or a gateway put in the body. `status` is any string: a value outside
 * {@link JOB_STATUSES} is reported by {@link statusKind} as `'unknown'`, never as a parse failure,
 * so a new vendor status cannot crash a role (contract, section 1).
 */

/** Every status the OpenAPI document lists, in its order. */
export const JOB_STATUSES = ['active', 'completed', 'archived', 'failed'] as const;

/** Statuses after which the agent does no more work on the job's current run. */
export const TERMINAL_STATUSES = ['completed', 'archived', 'failed'] as const;

/** One documented status. */
export type JobStatus = (typeof JOB_STATUSES)[number];

/** One terminal status. */
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

/** Where the agent works: the repository URL and the branch (`ref`, nullable). */
export const jobSourceSchema = z.object({
  repository: z.string().optional(),
  ref: z.string().nullable().optional(),
});

/** Parser of an agent job body; see the module comment for what it tolerates. */
export const agentJobSchema = z.object({
  id: z.string().optional(),
  status: z.string().optional(),
  source: jobSourceSchema.optional(),
  model: z.string().optional(),
  // `format: uri` in the document; kept as a plain string so an odd link never fails a parse.
  prLink: z.string().nullable().optional(),
  createdAt: z.string().optional(),
  archivedAt: z.string().nullable().optional(),
});

/** An agent job as parsed from the API: the contract's fields only. */
export type AgentJob = z.infer<typeof agentJobSchema>;

const TERMINAL: ReadonlySet<string> = new Set(TERMINAL_STATUSES);

/**
 * Sorts a status into what the poller acts on: `'active'` (still working), `'terminal'` (the run
 * ended) or `'unknown'` (missing, or a value the OpenAPI document does not list: log it and keep
 * polling, never crash).
 */
export function statusKind(status: string | undefined): 'active' | 'terminal' | 'unknown' {
  if (status === 'active') return 'active';
  if (status !== undefined && TERMINAL.has(status)) return 'terminal';
  return 'unknown';
}

/** Whether `status` is one of {@link TERMINAL_STATUSES}. */
export function isTerminalStatus(status: string | undefined): status is TerminalStatus {
  return status !== undefined && TERMINAL.has(status);
}
