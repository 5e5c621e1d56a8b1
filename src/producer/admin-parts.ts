import type { Queue } from 'bullmq';
import { LIBRARY_DEFAULTS, parseRate, type Rate } from '../config/index.js';
import { wakeDispatch } from '../store/jobs.js';
import { InvalidControlError } from './controls.js';

/** Wakes parked BullMQ jobs, 50 at a time. */
export async function wakeAll(queue: Queue, bullJobIds: readonly string[]): Promise<void> {
  for (let i = 0; i < bullJobIds.length; i += 50)
    await Promise.all(bullJobIds.slice(i, i + 50).map((id) => wakeDispatch(queue, id)));
}

export function rateOf(value: string | Rate | undefined): Rate {
  if (value === undefined) return LIBRARY_DEFAULTS.sendRateLimit;
  if (typeof value !== 'string') return value;
  const rate = parseRate(value);
  if (!rate)
    throw new InvalidControlError(
      'sendRateLimit',
      `expected N/DURATION such as 100/1h, got ${JSON.stringify(value)}`,
    );
  return rate;
}
