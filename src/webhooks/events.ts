import { eventBody } from '../dispatch/event-body.js';

/**
 * What a webhook carries of a completion event: the body the events routes send over HTTP (the
 * stream entry's `event` JSON with its `type`, contract section 5), and the facts a subscription
 * filters on.
 */

/** One completion event as a webhook sends it. */
export interface WebhookEvent {
  readonly type: string;
  readonly dispatchId: string;
  readonly projectId: string;
  /** The JSON body sent, exactly as signed. */
  readonly body: string;
}

/** The webhook of one stream entry (its flat field/value list). */
export function webhookEventOf(flat: readonly string[]): WebhookEvent {
  const body = eventBody(flat);
  return {
    type: body.type,
    dispatchId: body.dispatchId,
    projectId: body.projectId,
    body: JSON.stringify(body),
  };
}
