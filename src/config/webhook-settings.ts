import { duration, httpUrl, webhookSecret } from './values.js';

/**
 * The webhook settings (Standard Webhooks), spread into the settings table: the static endpoint,
 * its secret, how long a delivery is retried and how long one attempt may take.
 */
export const WEBHOOK_SETTINGS = {
  WEBHOOK_URL: {
    schema: httpUrl,
    description:
      'one static webhook endpoint that receives every completion event (Standard Webhooks); needs WEBHOOK_SECRET',
  },
  WEBHOOK_SECRET: {
    schema: webhookSecret,
    secret: true,
    description: 'signing secret of WEBHOOK_URL: `whsec_` + base64 of 16 to 64 bytes; never logged',
  },
  WEBHOOK_MAX_AGE: {
    schema: duration(1000),
    default: '24h',
    description:
      'how long a webhook delivery is retried (backoff with jitter) before it is dead-lettered',
  },
  WEBHOOK_TIMEOUT: {
    schema: duration(100),
    default: '10s',
    description: 'timeout of one webhook delivery attempt (connect, headers and body)',
  },
} as const;

/**
 * `WEBHOOK_URL` and `WEBHOOK_SECRET` go together: an endpoint without a secret would get unsigned
 * events, which its receiver could not tell from anyone's. The messages never echo a value.
 */
export function webhookPairProblems(
  url: string | undefined,
  secret: string | undefined,
): { setting: string; message: string }[] {
  if (url !== undefined && secret === undefined)
    return [{ setting: 'WEBHOOK_SECRET', message: 'is required when WEBHOOK_URL is set' }];
  if (url === undefined && secret !== undefined)
    return [{ setting: 'WEBHOOK_URL', message: 'is required when WEBHOOK_SECRET is set' }];
  return [];
}
