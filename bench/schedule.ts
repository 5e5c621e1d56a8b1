/**
 * The time budget of one `npm run bench`: the whole run must end within 10 minutes on a 2-core
 * machine, which may be busy with other work. Every scenario runs at least once; a repeat (the
 * second and third runs behind a median) goes ahead only if, after it, the time left still covers
 * one run of every scenario not started yet.
 */

/** Where the whole run must end, with a margin for writing the report and stopping Redis. */
export const RUN_BUDGET_MS = 570_000;

/** The deadline and what must still fit before it. */
export class Schedule {
  readonly #deadline: number;
  readonly #remaining: Map<string, number>;

  /**
   * `minimumMs`: the time one run of each scenario takes (measured on a busy 2-core machine), in
   * the order they will run.
   */
  constructor(minimumMs: ReadonlyMap<string, number>, budgetMs = RUN_BUDGET_MS) {
    this.#deadline = Date.now() + budgetMs;
    this.#remaining = new Map(minimumMs);
  }

  /** A scenario starts: its own minimum no longer needs reserving. */
  enter(id: string): void {
    this.#remaining.delete(id);
  }

  /** Whether a repeat expected to take `estimateMs` leaves enough for the scenarios to come. */
  allows(estimateMs: number): boolean {
    let reserved = 0;
    for (const ms of this.#remaining.values()) reserved += ms;
    return Date.now() + estimateMs + reserved <= this.#deadline;
  }
}
