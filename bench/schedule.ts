/**
 * The time budget of one `npm run bench`: the whole run must end within 10 minutes on a 2-core
 * machine, which may be busy with other work. Every scenario runs at least once; a repeat (the
 * second and third runs behind a median) goes ahead only if, after it, the time left still covers
 * one run of every scenario not started yet.
 *
 * What a scenario not started yet will take is its `minimumMs`, measured on a slow and busy
 * machine, times the pace of this machine: how long the calibrating scenario (a short one that
 * runs first, every repeat of it, which its minimum covers) took against its minimum, between
 * {@link PACE_FLOOR} and 1. Without the pace, a slow machine's minimums would leave a fast one no
 * room for any repeat of the early scenarios, and the figures watched (drain, sendMany, the
 * poller's p99) would come from single runs.
 */

/** Where the whole run must end, with a margin for writing the report and stopping Redis. */
export const RUN_BUDGET_MS = 570_000;

/**
 * The fastest pace the schedule believes: one short scenario may run faster against its minimum
 * than the long ones will, whose time is partly fixed (measured periods, timeouts).
 */
export const PACE_FLOOR = 0.6;

/** The deadline and what must still fit before it. */
export class Schedule {
  readonly #deadline: number;
  readonly #minimumMs: ReadonlyMap<string, number>;
  readonly #remaining: Map<string, number>;
  readonly #calibrating: string | undefined;
  #current: string | undefined;
  #pace = 1;

  /**
   * `minimumMs`: the time one run of each scenario takes (measured on a busy 2-core machine), in
   * the order they will run; `calibrating`: the scenario that sets the pace (see `calibrate`).
   */
  constructor(
    minimumMs: ReadonlyMap<string, number>,
    { budgetMs = RUN_BUDGET_MS, calibrating }: { budgetMs?: number; calibrating?: string } = {},
  ) {
    this.#deadline = Date.now() + budgetMs;
    this.#minimumMs = minimumMs;
    this.#remaining = new Map(minimumMs);
    this.#calibrating = calibrating;
  }

  /** How this machine runs against the minimums (1 until a calibrating scenario has run). */
  get pace(): number {
    return this.#pace;
  }

  /** A scenario starts: its own minimum no longer needs reserving. */
  enter(id: string): void {
    this.#current = id;
    this.#remaining.delete(id);
  }

  /** The calibrating scenario `id` took `tookMs` (every run of it): sets the pace. */
  calibrate(id: string, tookMs: number): void {
    const minimumMs = this.#minimumMs.get(id);
    if (!minimumMs) return;
    this.#pace = Math.min(1, Math.max(PACE_FLOOR, tookMs / minimumMs));
  }

  /**
   * Whether a repeat expected to take `estimateMs` leaves enough for the scenarios to come. The
   * calibrating scenario's repeats need only end before the deadline: its minimum covers them.
   */
  allows(estimateMs: number, nowMs = Date.now()): boolean {
    if (this.#current !== undefined && this.#current === this.#calibrating) {
      return nowMs + estimateMs <= this.#deadline;
    }
    let reserved = 0;
    for (const ms of this.#remaining.values()) reserved += ms * this.#pace;
    return nowMs + estimateMs + reserved <= this.#deadline;
  }
}
