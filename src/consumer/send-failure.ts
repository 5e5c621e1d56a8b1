import { AgentApiError, configRejectionStatus, WriteDeadlineError } from '../agent-api/index.js';

/**
 * The one place that decides what a failed send means.
 *
 * Who owns retries: BullMQ, only. The agent-API client never retries (a retried POST could
 * deliver a prompt twice), and a 429 or a budget wait parks the job with `moveToDelayed`, which
 * spends no attempt. So undici retries and BullMQ attempts never multiply: a follow-up is written
 * to the wire at most `SEND_ATTEMPTS` times, and only after failures that prove it was not taken.
 */
export type SendFailure =
  /** The API refused it for good (400, 404): end it undeliverable. */
  | { kind: 'permanent'; reason: string }
  /**
   * The API rejected the key (401/403) or redirected (3xx: `AGENT_API_URL` is wrong): nothing is
   * wrong with this follow-up. Pause every send of the fleet until a probe gets through; queue it
   * again, budget unit refunded (the API did not take it), no attempt spent.
   */
  | { kind: 'auth_paused'; httpStatus: number }
  /** 429: park the project, not the queue; retry when the wait is over, no attempt spent. */
  | { kind: 'rate_limited'; retryAfterMs: number | undefined }
  /**
   * Certainly not processed (5xx, the request never left): retry with backoff. `refund` gives the
   * budget unit back when the request never reached the API.
   */
  | { kind: 'transient'; reason: string; refund: boolean }
  /**
   * Not written: its budget grant was too old to arrive within the margin (`WriteDeadlineError`).
   * Given back and acquired again, no attempt spent.
   */
  | { kind: 'regrant' }
  /** May have been delivered (timeout or reset after the request was written): settle first. */
  | { kind: 'ambiguous'; reason: string }
  /** The API answered success with an unreadable body: delivered, job unknown. */
  | { kind: 'delivered'; reason: string };

/** Classifies a send failure. Anything not from the agent-API client counts as ambiguous. */
export function classifySendFailure(err: unknown): SendFailure {
  if (!(err instanceof AgentApiError)) return { kind: 'ambiguous', reason: 'unexpected_error' };
  if (err.ambiguous) return { kind: 'ambiguous', reason: err.code };
  if (err.cause instanceof WriteDeadlineError) return { kind: 'regrant' };
  // A 429 first: it is the answer a busy fleet gets most, and it needs nothing else to decide.
  if (err.code === 'rate_limited') return { kind: 'rate_limited', retryAfterMs: err.retryAfterMs };
  const rejected = configRejectionStatus(err);
  if (rejected !== undefined) return { kind: 'auth_paused', httpStatus: rejected };
  switch (err.code) {
    case 'bad_request':
    case 'unauthorized':
    case 'not_found':
      return { kind: 'permanent', reason: err.code };
    case 'server':
      return { kind: 'transient', reason: err.code, refund: false };
    case 'network':
      return { kind: 'transient', reason: err.code, refund: true };
    case 'bad_response':
      return { kind: 'delivered', reason: err.code };
    case 'timeout':
      // A timeout that is not ambiguous never wrote the request (connect timeout).
      return { kind: 'transient', reason: err.code, refund: true };
  }
}
