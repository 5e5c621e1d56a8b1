import { Job, type Queue } from 'bullmq';

/**
 * Wakes the BullMQ job of a dispatch that was parked waiting for its lane: the lane's previous
 * dispatch just ended. A job that is not delayed (not parked yet, or already running) is left
 * alone: the consumer checks the lane again right after parking, so no wake-up is lost between
 * the two (see `park` in the consumer).
 */
export async function wakeDispatch(queue: Queue, dispatchId: string): Promise<void> {
  const job = await Job.fromId(queue, dispatchId);
  if (!job || !(await job.isDelayed())) return;
  await job.promote().catch(() => {
    // It left the delayed set in between (promoted by its own re-check, or by its timer).
  });
}
