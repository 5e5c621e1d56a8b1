import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { waitForEvents } from '../support/events.js';
import { useService } from '../support/service.js';

/** A gateway in front of `target` that forwards every request and answers `status` to the first create. */
async function gateway(target: URL, status: number): Promise<{ url: string; server: Server }> {
  let creates = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const { hostname: host, port } = target;
      const opts = { host, port, path: req.url, method: req.method, headers: req.headers };
      const up = request(opts, (upRes) => {
        const body: Buffer[] = [];
        upRes.on('data', (c: Buffer) => body.push(c));
        upRes.on('end', () => {
          const isCreate = req.method === 'POST' && /\/job\/?$/.test(req.url ?? '');
          if (isCreate && creates++ === 0) {
            res.writeHead(status, { 'content-type': 'text/plain' });
            return res.end('gateway error');
          }
          res.writeHead(upRes.statusCode ?? 500, upRes.headers);
          res.end(Buffer.concat(body));
        });
      });
      up.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('a creation answered 5xx by a gateway after the API took it', () => {
  const { simulator, ns, start } = useService('creation-gateway', { workTimeMs: 200 });

  it.each([502, 504])(
    'a %i is in doubt: job.undeliverable (ambiguous), never POSTed again',
    async (status) => {
      const proxy = await gateway(new URL(simulator().url), status);
      try {
        const service = start({ AGENT_API_URL: proxy.url });
        const { dispatchId } = await service.producer.create({ projectId: 'p1', prompt: 'make' });
        const [event] = await waitForEvents(ns().redis, ns().eventsStream, 1, 30_000);
        expect(event).toMatchObject({ type: 'job.undeliverable', dispatchId, jobId: '' });
        expect(event!.event['reason']).toBe('ambiguous');
        // The API created one job; a retry would have created a second.
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        expect(simulator().requests.filter((r) => r.kind === 'create')).toHaveLength(1);
      } finally {
        proxy.server.close();
      }
    },
    40_000,
  );
});
