import { AgentDispatchError } from '../agent-dispatch-error.js';

/**
 * The webhooks' errors, in a module that imports nothing heavy: the library's entry exports them
 * (src/errors.ts) without loading undici or the webhook queues.
 */

/** Bad input to a webhook control; `field` names what is wrong. Code `invalid_webhook`. */
export class InvalidWebhookError extends AgentDispatchError {
  readonly code = 'invalid_webhook';
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${field}: ${problem}`);
    this.name = 'InvalidWebhookError';
  }
}

/** A failed attempt: an answer that is neither 2xx nor 410, or no answer. Code `webhook_failed`. */
export class WebhookAttemptError extends AgentDispatchError {
  readonly code = 'webhook_failed';
  constructor(
    message: string,
    /** The HTTP status, when the receiver answered. */
    readonly status?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'WebhookAttemptError';
  }
}
