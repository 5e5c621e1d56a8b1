/**
 * A worker's own limit on sends in flight, additive increase / multiplicative decrease, as TCP
 * does: halve on a 429 or a slow answer, grow by one after a limit's worth of healthy answers.
 * The fleet-wide budget is enforced in Redis; this only keeps one process from piling requests on
 * an API that is already pushing back.
 */
export interface ConcurrencyOptions {
  /** Upper bound: `WORKER_CONCURRENCY`. */
  readonly max: number;
  /** An answer slower than this counts as congestion. @defaultValue 5000 */
  readonly slowMs?: number;
  /** Decreases closer together than this count once. @defaultValue 1000 */
  readonly cooldownMs?: number;
  /** Called when the limit changes. */
  readonly onChange?: (limit: number, reason: 'increase' | 'rate_limited' | 'slow') => void;
  readonly now?: () => number;
}

/** The AIMD controller. */
export class ConcurrencyController {
  private current: number;
  private credit = 0;
  private lastDecreaseAt = -Infinity;
  private readonly slowMs: number;
  private readonly cooldownMs: number;
  private readonly now: () => number;

  constructor(private readonly options: ConcurrencyOptions) {
    this.current = options.max;
    this.slowMs = options.slowMs ?? 5_000;
    this.cooldownMs = options.cooldownMs ?? 1_000;
    this.now = options.now ?? Date.now;
  }

  /** The current limit. */
  get limit(): number {
    return this.current;
  }

  /** A send answered; `latencyMs` decides whether it counts as healthy or slow. */
  onAnswer(latencyMs: number): void {
    if (latencyMs > this.slowMs) {
      this.decrease('slow');
      return;
    }
    if (this.current >= this.options.max) return;
    this.credit += 1;
    if (this.credit >= this.current) {
      this.credit = 0;
      this.current += 1;
      this.options.onChange?.(this.current, 'increase');
    }
  }

  /** The API answered 429. */
  onRateLimited(): void {
    this.decrease('rate_limited');
  }

  private decrease(reason: 'rate_limited' | 'slow'): void {
    const now = this.now();
    if (now - this.lastDecreaseAt < this.cooldownMs) return;
    this.lastDecreaseAt = now;
    this.credit = 0;
    const next = Math.max(1, Math.floor(this.current / 2));
    if (next === this.current) return;
    this.current = next;
    this.options.onChange?.(this.current, reason);
  }
}
