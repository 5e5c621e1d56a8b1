/**
 * How long a send may be in flight: from its intent (ACQUIRE, `sendingAt`) until its outcome is
 * surely recorded or surely lost. Workers and pollers both wait this long before they treat a
 * dispatch still `sending` as one whose worker died, so neither ends or doubts a live request.
 */

/**
 * Past the request's own timeouts: our bookkeeping between the intent and the request, and a
 * worker's event loop running late.
 * @defaultValue 5 s
 */
const IN_FLIGHT_SLACK_MS = 5_000;

/** The request timeouts a send is bounded by (from the config). */
export interface SendTimeouts {
  readonly connectTimeoutMs: number;
  readonly sendTimeoutMs: number;
}

/**
 * How long a worker keeps trying to record a send's answer (MARK_SENT) while Redis fails it: a
 * definite 200 is the only proof of delivery, so it is not given up at the first error. As long
 * as the request itself may wait for its answer, `SEND_TIMEOUT`.
 */
export function markSentRetryMs(timeouts: SendTimeouts): number {
  return timeouts.sendTimeoutMs;
}

/**
 * The longest a send can be in flight: connect, then headers and body (each `SEND_TIMEOUT`,
 * undici's `headersTimeout` and `bodyTimeout`), then the retries of recording its answer, and
 * slack.
 */
export function sendInFlightMs(timeouts: SendTimeouts): number {
  return (
    timeouts.connectTimeoutMs +
    2 * timeouts.sendTimeoutMs +
    markSentRetryMs(timeouts) +
    IN_FLIGHT_SLACK_MS
  );
}
