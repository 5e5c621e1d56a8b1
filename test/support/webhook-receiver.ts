import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real webhook receiver on 127.0.0.1:0 for the tests: it records every request with its
 * Standard Webhooks headers and answers what the test's `answer` says (a status, and a Location for
 * a redirect). `verify` checks a signature on its own (node:crypto), not with the service's code.
 */

/** One request as received. */
export interface ReceivedWebhook {
  readonly id: string;
  readonly timestamp: string;
  readonly signature: string;
  readonly body: string;
  /** The status it was answered. */
  readonly status: number;
}

/** How the receiver answers a request: `attempt` counts the requests with its webhook-id (1 first). */
export type Answer = (request: { id: string; attempt: number; path: string }) => {
  status: number;
  location?: string;
};

/** A started receiver. */
export interface WebhookReceiver {
  readonly url: string;
  readonly received: ReceivedWebhook[];
  /** The webhook-ids of the requests answered 2xx. */
  delivered(): string[];
  close(): Promise<void>;
}

/** Starts a receiver; `answer` defaults to 200 for everything. */
export async function startWebhookReceiver(
  answer: Answer = () => ({ status: 200 }),
): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const server = createServer((req, res) => {
    void bodyOf(req).then((body) => {
      const header = (name: string) => String(req.headers[name] ?? '');
      const id = header('webhook-id');
      const attempt = received.filter((r) => r.id === id).length + 1;
      const { status, location } = answer({ id, attempt, path: req.url ?? '/' });
      received.push({
        id,
        timestamp: header('webhook-timestamp'),
        signature: header('webhook-signature'),
        body,
        status,
      });
      res.writeHead(status, location ? { location } : {}).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    delivered: () => received.filter((r) => r.status >= 200 && r.status < 300).map((r) => r.id),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function bodyOf(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    req.on('end', () => resolve(text));
  });
}

/** Whether `request` carries a valid `v1` signature of `secret` (`whsec_` + base64). */
export function verify(secret: string, request: ReceivedWebhook): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key)
    .update(`${request.id}.${request.timestamp}.${request.body}`)
    .digest();
  return request.signature.split(' ').some((part) => {
    const [version, mac] = part.split(',');
    const given = Buffer.from(mac ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/** A fixed secret for the static endpoint of a test. */
export const TEST_WEBHOOK_SECRET = `whsec_${Buffer.from('agent-dispatch-test-webhook-secret').toString('base64')}`;
