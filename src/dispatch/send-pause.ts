import type { StoreState } from './store-state.js';

/**
 * The store's fleet-wide pause of every send (see `Keys.authPause`): set when the agent API
 * rejects the key or redirects, probed with a backoff, ended by an answer. Reached through
 * {@link DispatchStore}; `auth-pause.ts` logs it.
 */

/**
 * Backoff of the probes while sends are paused: the first comes 1 s after the pause started, each
 * next one twice as late, at most 25 s, so a working key is in use within 30 s of being in place
 * (25 s plus a delayed job's wake-up and the probe itself).
 */
export const AUTH_PROBE_BACKOFF = { firstBackoffMs: 1_000, maxBackoffMs: 25_000 } as const;

/** The fleet-wide pause of every send, as `DispatchStore.sendPause` reads it. */
export interface SendPause {
  readonly sinceMs: number;
  /** The status that started it: 401 or 403 (the key), 3xx (`AGENT_API_URL`). */
  readonly httpStatus: number;
  /** When the next probe may go. */
  readonly probeAt: number;
}

export async function pauseSends(
  state: StoreState,
  httpStatus: number,
  backoff: { firstBackoffMs: number; maxBackoffMs: number },
): Promise<{ started: boolean; probeAt: number }> {
  const reply = (await state.scripts.run(
    'pauseSends',
    [state.keys.authPause],
    [httpStatus, Math.round(backoff.firstBackoffMs), Math.round(backoff.maxBackoffMs)],
  )) as [number, number];
  return { started: reply[0] === 1, probeAt: reply[1] };
}

/** Ends the pause; resolves to whether it was paused, and the jobs it had parked (taken once). */
export async function resumeSends(
  state: StoreState,
): Promise<{ resumed: boolean; parked: string[] }> {
  const { authPause, authPaused } = state.keys;
  const replies = await state.redis
    .multi()
    .del(authPause)
    .smembers(authPaused)
    .del(authPaused)
    .exec();
  const [ended, members] = (replies ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
  return { resumed: ended === 1, parked: (members as string[] | undefined) ?? [] };
}

/** Notes a BullMQ job parked by the pause, so the end of the pause wakes it at once. */
export async function noteParked(state: StoreState, bullJobId: string): Promise<void> {
  await state.redis.sadd(state.keys.authPaused, bullJobId);
}

export async function claimProbe(state: StoreState): Promise<'none' | 'wait' | 'probe'> {
  const reply = await state.scripts.run('claimProbe', [state.keys.authPause], []);
  return reply === 1 ? 'probe' : reply === 0 ? 'wait' : 'none';
}

export async function sendPause(state: StoreState): Promise<SendPause | undefined> {
  return parseSendPause(await state.redis.hgetall(state.keys.authPause));
}

/** Reads the pause hash (see `Keys.authPause`); `undefined` when absent or unreadable. */
export function parseSendPause(hash: Record<string, string>): SendPause | undefined {
  const probeAt = Number(hash['probeAt']);
  if (!hash['probeAt'] || !Number.isFinite(probeAt)) return undefined;
  return {
    sinceMs: Number(hash['since'] ?? 0),
    httpStatus: Number(hash['httpStatus'] ?? 0),
    probeAt,
  };
}
