import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import * as lua from './scripts.js';

/** What a Lua script answers, as ioredis hands it back. */
export type Reply = string | number | null | Reply[];

/** A Lua script run by SHA, loaded again after a Redis restart forgets it. */
export class Script {
  private readonly sha: string;
  constructor(readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run(
    redis: Redis,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<Reply> {
    try {
      return (await redis.evalsha(this.sha, keys.length, ...keys, ...args)) as Reply;
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return (await redis.eval(this.source, keys.length, ...keys, ...args)) as Reply;
    }
  }
}

/** Every script of the dispatch store, loaded lazily by SHA. */
export const SCRIPTS = {
  acquire: new Script(lua.ACQUIRE),
  markSent: new Script(lua.MARK_SENT),
  requeue: new Script(lua.REQUEUE),
  finish: new Script(lua.FINISH),
  reschedule: new Script(lua.RESCHEDULE),
  due: new Script(lua.DUE),
  isNext: new Script(lua.IS_NEXT),
  carry: new Script(lua.CARRY),
  orphan: new Script(lua.ORPHAN),
  authPause: new Script(lua.AUTH_PAUSE),
  claimProbe: new Script(lua.CLAIM_PROBE),
};

/** The REGISTER script's source: the producer runs it with EVAL inside its MULTI. */
export const REGISTER_SOURCE = lua.REGISTER;
