/**
 * The simulated API's send limit: at most `max` accepted sends per project in any sliding window of
 * `windowMs`. Each project keeps a queue of the times of its accepted sends, oldest first, so a
 * check drops expired times from the head and compares the length: O(1) amortized per send, which
 * keeps the simulator fast enough for benchmarks at thousands of requests per second.
 */

/** A FIFO of timestamps in an array with a moving head, compacted when half of it is dead. */
class TimestampQueue {
  #items: number[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  /** The oldest timestamp, or `undefined` when empty. */
  peek(): number | undefined {
    return this.#items[this.#head];
  }

  push(at: number): void {
    this.#items.push(at);
  }

  shift(): void {
    this.#head += 1;
    // Compacting only once the dead part is large and at least half keeps each shift O(1) amortized.
    if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }
}

/** The answer to "may this project send now?". */
export type WindowDecision =
  { readonly allowed: true } | { readonly allowed: false; readonly retryAfterMs: number };

/** Sliding-window limits of every project. */
export class SendWindows {
  readonly #queues = new Map<string, TimestampQueue>();

  constructor(
    readonly max: number,
    readonly windowMs: number,
  ) {}

  /** Whether a send at `now` fits; when not, how long until the oldest send leaves the window. */
  check(projectId: string, now: number): WindowDecision {
    const queue = this.#queues.get(projectId);
    if (!queue) return { allowed: true };
    this.#expire(queue, now);
    if (queue.length < this.max) return { allowed: true };
    const oldest = queue.peek() ?? now;
    return { allowed: false, retryAfterMs: Math.max(1, oldest + this.windowMs - now) };
  }

  /** Counts an accepted send. Call only after {@link check} allowed it. */
  record(projectId: string, now: number): void {
    let queue = this.#queues.get(projectId);
    if (!queue) {
      queue = new TimestampQueue();
      this.#queues.set(projectId, queue);
    }
    queue.push(now);
  }

  /** Accepted sends of a project still inside the window at `now`. */
  count(projectId: string, now: number): number {
    const queue = this.#queues.get(projectId);
    if (!queue) return 0;
    this.#expire(queue, now);
    return queue.length;
  }

  #expire(queue: TimestampQueue, now: number): void {
    const cutoff = now - this.windowMs;
    for (
      let oldest = queue.peek();
      oldest !== undefined && oldest <= cutoff;
      oldest = queue.peek()
    ) {
      queue.shift();
    }
  }
}
