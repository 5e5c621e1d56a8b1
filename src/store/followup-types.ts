import type { DispatchRecord } from '../dispatch/record.js';

/* What the follow-ups pages and a redrive read (`FollowupViews`), as the store answers it. */

/** The open follow-ups of one project, by state. */
export interface OpenCounts {
  queued: number;
  sending: number;
  /** Sent or unsettled: tracked until their agent job ends. */
  tracked: number;
}

/** One queued follow-up, as the page lists it. */
export interface QueuedItem {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly enqueuedAt: number;
}

/** One follow-up that ended undeliverable or timed out and keeps its prompt for a redrive. */
export interface DeadLetter {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly type: string;
  readonly reason: string;
  readonly finishedAt: number;
  /** The follow-up that redrove it, once redriven. */
  readonly redrivenTo: string | undefined;
}

/** Where a page of dead letters by end time ends: its last entry. */
export interface DeadLetterCursor {
  readonly finishedAt: number;
  readonly dispatchId: string;
}

/** One follow-up as its page shows it: its record without the prompt, its event, its links. */
export interface FollowupDetail {
  readonly record: DispatchRecord;
  /** Whether its prompt is still stored (open, or a dead letter within its retention). */
  readonly promptKept: boolean;
  readonly redriveOf: string | undefined;
  readonly redrivenTo: string | undefined;
  /** Its completion event's stream fields, once it ended (and while the stream keeps it). */
  readonly event: Readonly<Record<string, string>> | undefined;
  readonly eventId: string | undefined;
}
