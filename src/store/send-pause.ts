import type { StoreState } from './store-state.js';

/**
 * The store's fleet-wide pause of every send (see `Keys.authPause`): set when the agent API
 * rejects the key or redirects, probed with a backoff, ended by an answer. Reached through
 * `DispatchStore.pause`; `auth-pause.ts` logs it.
 */

/**
 * Backoff of the probes while sends are paused: the first comes 1 s after the pause started, each
 * next one twice as late, at most 25 s, so a working key is in use within 30 s of being in place
 * (25 s plus a delayed job's wake-up and the probe itself).
 */
export const AUTH_PROBE_BACKOFF = { firstBackoffMs: 1_000, maxBackoffMs: 25_000 } as const;

/** The fleet-wide pause of every send, as `SendPauses.current` reads it. */
export interface SendPause {
  readonly sinceMs: number;
  /** The status that started it: 401 or 403 (the key), 3xx (`AGENT_API_URL`). */
  readonly httpStatus: number;
  /** When the next probe may go. */
  readonly probeAt: number;
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

/** The fleet's send pause in one store: `DispatchStore.pause`. */
export class SendPauses {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /**
   * Pauses every send of the fleet after `httpStatus` (401/403: the key; 3xx: `AGENT_API_URL`);
   * `started`: this call started it (and logs it); `probeAt`: when the next probe may go.
   */
  async start(
    httpStatus: number,
    backoff: { firstBackoffMs: number; maxBackoffMs: number } = AUTH_PROBE_BACKOFF,
  ): Promise<{ started: boolean; probeAt: number }> {
    const state = this.#state;
    const reply = (await state.scripts.run(
      'pauseSends',
      [state.keys.authPause],
      [httpStatus, Math.round(backoff.firstBackoffMs), Math.round(backoff.maxBackoffMs)],
    )) as [number, number];
    return { started: reply[0] === 1, probeAt: reply[1] };
  }

  /** Ends the pause of every send: whether it was paused, and the jobs it parked, to wake. */
  async end(): Promise<{ resumed: boolean; parked: string[] }> {
    const state = this.#state;
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

  /** Notes a BullMQ job parked until the pause's next probe: the pause's end wakes it. */
  async noteParked(bullJobId: string): Promise<void> {
    const state = this.#state;
    await state.redis.sadd(state.keys.authPaused, bullJobId);
  }

  /** For a status read while sends are paused: `none`, `wait`, or `probe` (this caller probes). */
  async claimProbe(): Promise<'none' | 'wait' | 'probe'> {
    const state = this.#state;
    const reply = await state.scripts.run('claimProbe', [state.keys.authPause], []);
    return reply === 1 ? 'probe' : reply === 0 ? 'wait' : 'none';
  }

  /** The pause of every send, or `undefined` when sends are not paused. */
  async current(): Promise<SendPause | undefined> {
    const state = this.#state;
    return parseSendPause(await state.redis.hgetall(state.keys.authPause));
  }
}
