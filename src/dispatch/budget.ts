import type { Rate } from '../config/index.js';

/**
 * The budget as ACQUIRE counts it, for `SEND_RATE_LIMIT` and for a project's own limit alike: the
 * same margin and tolerance, so a project limit is enforced exactly as the default is.
 */

/** A rate as the budget log counts it: its window with the margin, and the late-slot tolerance. */
export interface BudgetRate {
  readonly max: number;
  /** The window the log counts over: the rate's window plus {@link budgetMarginMs}. */
  readonly windowMs: number;
  /** How late a reserved slot may still be spent (half the margin). */
  readonly toleranceMs: number;
}

/**
 * Margin added to the budget window: our clock marks a send when the intent is recorded, the
 * API's when the request arrives, a few milliseconds later and not always by the same amount. The
 * margin keeps a window as the API measures it within the budget too; it costs 2.5 % of the
 * budget at most. Reserved slots may be spent at most half of it late.
 */
export function budgetMarginMs(windowMs: number): number {
  return Math.min(1_000, Math.max(100, Math.round(windowMs * 0.025)));
}

/** The {@link BudgetRate} of `rate`. */
export function budgetRate(rate: Rate): BudgetRate {
  const margin = budgetMarginMs(rate.windowMs);
  return { max: rate.max, windowMs: rate.windowMs + margin, toleranceMs: margin / 2 };
}
