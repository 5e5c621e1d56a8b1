import { durably } from '../redis/disk-wait.js';
import type { BudgetRate } from '../dispatch/budget.js';
import { readShowReply, type ProjectState, type ShowReply } from '../dispatch/project-state.js';
import type { StoreState } from './store-state.js';

export type { ProjectState } from '../dispatch/project-state.js';

/**
 * An operator's controls of one project (`Keys.projectControls`): pause and resume, its own send
 * limit, and what `project show` reads. Each change is one script, read by every ACQUIRE
 * (acquire-n.lua), so the whole fleet honours it from its next send, and is on disk before it
 * answers (`StoreOptions.durability`, as an enqueue is): a crash must not undo a pause or a limit
 * the operator was told about. Reached through `DispatchStore.projects`.
 */

/** Open follow-ups `show` reads at most to count a project's (see projectShow-5.lua). */
export const SHOW_SCAN_CAP = 10_000;

/** The project controls of one store. */
export class ProjectControls {
  readonly #state: StoreState;

  constructor(state: StoreState) {
    this.#state = state;
  }

  /** Pauses a project; `changed` is false when it already was paused (since `pausedAt`). */
  async pause(projectId: string): Promise<{ changed: boolean; pausedAt: number }> {
    const [changed, pausedAt] = (await this.#pauseScript(projectId, true)) as [number, number];
    return { changed: changed === 1, pausedAt };
  }

  /**
   * Resumes a project; `changed` is false when it was not paused. Resolves to the BullMQ jobs its
   * pause parked (taken once), for the caller to wake.
   */
  async resume(projectId: string): Promise<{ changed: boolean; parked: string[] }> {
    const [changed, parked] = (await this.#pauseScript(projectId, false)) as [number, string[]];
    return { changed: changed === 1, parked };
  }

  /** Notes a BullMQ job parked by its project's pause, so the resume wakes it at once. */
  async noteParked(projectId: string, bullJobId: string): Promise<void> {
    await this.#state.redis.sadd(this.#state.keys.projectPaused(projectId), bullJobId);
  }

  /** Whether the project is paused now. */
  async isPaused(projectId: string): Promise<boolean> {
    return (await this.#state.redis.hget(this.#keys(projectId).controls, 'paused')) === '1';
  }

  /**
   * Notes a BullMQ job that waits out its project's 429 park until `untilMs`, so that an unpark
   * wakes it at once. The set lives a minute past the latest park noted in it: a park that ends by
   * itself wakes its jobs by their own delay.
   */
  async noteParkWaiter(projectId: string, bullJobId: string, untilMs: number): Promise<void> {
    const key = this.#state.keys.parkWaiters(projectId);
    const expireAt = Math.ceil(untilMs) + 60_000;
    await this.#state.redis
      .multi()
      .sadd(key, bullJobId)
      .pexpireat(key, expireAt, 'NX')
      .pexpireat(key, expireAt, 'GT')
      .exec();
  }

  /** Whether the project is parked after a 429 now (by this process's clock). */
  async isParked(projectId: string): Promise<boolean> {
    return (
      Number((await this.#state.redis.get(this.#state.keys.park(projectId))) ?? 0) > Date.now()
    );
  }

  /**
   * Clears a project's 429 park (projectUnpark-2.lua), on disk before it answers, as the other
   * controls. Resolves to the park's end it cleared (`undefined`: none) and the BullMQ jobs that
   * waited it out, for the caller to wake.
   */
  async unpark(projectId: string): Promise<{ parkedUntil: number | undefined; waiting: string[] }> {
    const { keys } = this.#state;
    const park = keys.park(projectId);
    const [untilMs, waiting] = (await this.#durably(park, () =>
      this.#state.scripts.run('projectUnpark', [park, keys.parkWaiters(projectId)], []),
    )) as [number, string[]];
    return { parkedUntil: untilMs > 0 ? untilMs : undefined, waiting };
  }

  /**
   * Sets (`limit` as written, with its counted `rate`) or clears (`undefined`) a project's own
   * limit. Resolves to the previous one (`undefined`: none) and the dispatches whose slot,
   * reserved under the old limit, was dropped: the caller wakes them to reserve again.
   */
  async setLimit(
    projectId: string,
    limit: { text: string; rate: BudgetRate } | undefined,
  ): Promise<{ previous: string | undefined; reservedBy: string[] }> {
    const { controls, budget } = this.#keys(projectId);
    const [previous, dropped] = (await this.#durably(controls, () =>
      this.#state.scripts.run(
        'projectLimit',
        [controls, budget, this.#state.keys.controlledProjects],
        [
          projectId,
          limit?.text ?? '',
          limit?.rate.max ?? 0,
          limit?.rate.windowMs ?? 0,
          limit?.rate.toleranceMs ?? 0,
        ],
      ),
    )) as [string, string[]];
    return { previous: previous || undefined, reservedBy: dropped };
  }

  /**
   * What `project show` prints; `defaults` is `SEND_RATE_LIMIT` as counted. The counts read at
   * most `scanCap` open follow-ups (0: no counts, for a caller that counted them itself).
   */
  async show(
    projectId: string,
    defaults: BudgetRate,
    scanCap = SHOW_SCAN_CAP,
  ): Promise<ProjectState> {
    const { keys } = this.#state;
    const { controls, budget } = this.#keys(projectId);
    const reply = (await this.#state.scripts.run(
      'projectShow',
      [controls, budget, keys.park(projectId), keys.open, keys.laneHeads(projectId)],
      [defaults.max, defaults.windowMs, keys.dispatch(''), projectId, scanCap],
    )) as ShowReply;
    return readShowReply(projectId, reply);
  }

  /** The projects that have a pause or a limit now. */
  controlled(): Promise<string[]> {
    return this.#state.redis.smembers(this.#state.keys.controlledProjects);
  }

  #keys(projectId: string) {
    const { keys } = this.#state;
    return { controls: keys.projectControls(projectId), budget: keys.budget(projectId) };
  }

  #pauseScript(projectId: string, pause: boolean) {
    const { keys } = this.#state;
    const controls = keys.projectControls(projectId);
    return this.#durably(controls, () =>
      this.#state.scripts.run(
        'projectPause',
        [controls, keys.projectPaused(projectId), keys.controlledProjects],
        [projectId, pause ? 1 : 0],
      ),
    );
  }

  /** Runs a change of `key`'s controls and waits for the disk (see `durably`). */
  #durably<T>(key: string, write: () => Promise<T>): Promise<T> {
    return durably(this.#state.options.durability, this.#state.redis, key, write);
  }
}
