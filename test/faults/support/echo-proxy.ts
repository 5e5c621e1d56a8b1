import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';

/**
 * A misbehaving gateway in front of the simulator: it forwards requests, but answers a share of
 * them itself with an error whose body repeats the request's `Authorization` header, as a
 * careless proxy or API might. Whatever the service does with such errors (log them, keep them,
 * show them), the key must not come out.
 */
export interface EchoProxy {
  readonly url: string;
  /** Errors answered with the header echoed. */
  echoed(): number;
  close(): Promise<void>;
}

const ECHOES: readonly ((auth: string) => [number, string, string])[] = [
  (auth) => [502, 'text/plain', `bad gateway: upstream refused "Authorization: ${auth}"`],
  (auth) => [429, 'application/json', JSON.stringify({ error: `too many requests for ${auth}` })],
  (auth) => [503, 'text/html', `<html><body><h1>503</h1><pre>${auth}</pre></body></html>`],
];

/**
 * Starts the proxy in front of `target`; `rate` is the share of requests answered with an echo.
 * Requests for which `hang` answers true are read and never answered.
 */
export async function startEchoProxy(
  target: string,
  rate: number,
  hang: (method: string, path: string) => boolean = () => false,
): Promise<EchoProxy> {
  let echoed = 0;
  const server = createServer((req, res) => {
    void handle(req, res);
  });
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const auth = req.headers.authorization ?? '';
    if (hang(req.method ?? '', req.url ?? '')) return;
    if (Math.random() < rate) {
      echoed++;
      const echo = ECHOES[Math.floor(Math.random() * ECHOES.length)] ?? ECHOES[0];
      const [status, type, body] = echo ? echo(auth) : [502, 'text/plain', auth];
      res.writeHead(status, { 'content-type': type }).end(body);
      return;
    }
    try {
      const upstream = await request(`${target}${req.url ?? '/'}`, {
        method: (req.method ?? 'GET') as 'GET' | 'POST',
        headers: {
          authorization: auth,
          'content-type': req.headers['content-type'] ?? 'application/json',
        },
        body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      res.writeHead(upstream.statusCode, {
        'content-type': String(upstream.headers['content-type'] ?? 'application/json'),
        ...(upstream.headers['retry-after']
          ? { 'retry-after': String(upstream.headers['retry-after']) }
          : {}),
      });
      for await (const chunk of upstream.body) res.write(chunk);
      res.end();
    } catch {
      // The simulator hung up (a reset or timeout fault): so does the gateway.
      res.destroy();
    }
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    echoed: () => echoed,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
