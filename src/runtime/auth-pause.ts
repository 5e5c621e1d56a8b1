import type { Queue } from 'bullmq';
import type { Logger } from '../telemetry/logger.js';
import { LIFECYCLE } from '../telemetry/names.js';
import type { DispatchStore } from '../store/store.js';
import { wakeDispatch } from '../store/jobs.js';

/**
 * The fleet-wide pause of every send while the agent API rejects the key or redirects (contract,
 * promise 8): starting it, with the one log line an operator needs, and ending it. Workers and
 * pollers both end up here; the flag itself lives in the store (see `Keys.authPause`).
 */

/** What an operator should do about a rejection with this status. Never names the key itself. */
export function authPauseHint(httpStatus: number): string {
  if (httpStatus >= 300 && httpStatus < 400) {
    return 'the agent API answered with a redirect: AGENT_API_URL is wrong (check its scheme, host and path), fix it and restart the fleet';
  }
  return 'the agent API rejected the key (expired, revoked, wrong, or outside its scope or IP allowlist): put a working key in AGENT_API_KEY_FILE (re-read when it changes and on SIGHUP) or in AGENT_API_KEY (restart); sending resumes by itself within 30 s';
}

/**
 * Pauses every send after a rejection with `httpStatus`, logging one `error` line for the whole
 * fleet (only the call that started the pause logs). Resolves to when the next probe may go.
 */
export async function pauseSends(
  store: DispatchStore,
  httpStatus: number,
  logger: Logger,
): Promise<number> {
  const { started, probeAt } = await store.pause.start(httpStatus);
  if (started) {
    logger.error(
      {
        httpStatus,
        nextProbeInMs: Math.max(0, probeAt - Date.now()),
        hint: authPauseHint(httpStatus),
      },
      LIFECYCLE.sendsPaused,
    );
  }
  return probeAt;
}

/**
 * Ends the pause after an answer that was not a rejection, logs when this call ended it, and wakes
 * every follow-up the pause had parked: they go now, not at the probe time each of them saw.
 */
export async function resumeSends(
  store: DispatchStore,
  queue: Queue,
  logger: Logger,
): Promise<void> {
  const { resumed, parked } = await store.pause.end();
  if (resumed) logger.info({ woken: parked.length }, LIFECYCLE.sendsResumed);
  for (let i = 0; i < parked.length; i += WAKE_BATCH) {
    await Promise.all(parked.slice(i, i + WAKE_BATCH).map((id) => wakeDispatch(queue, id)));
  }
}

/** Parked jobs woken at a time when a pause ends. */
const WAKE_BATCH = 50;
