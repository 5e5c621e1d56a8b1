import { createServer, Socket, type AddressInfo } from 'node:net';

/** A TCP proxy on a free loopback port; what passes through is up to its `pair` callback. */
export interface TcpProxy {
  /** `redis://127.0.0.1:<port>` of the proxy. */
  readonly url: string;
  /** Cuts every connection and stops listening. */
  close(): Promise<void>;
}

/**
 * Starts a proxy in front of `target` (`redis://host:port`). For each client it connects one
 * upstream socket and hands both to `pair`, which forwards (or not) what each side sends. An error
 * on either side cuts both.
 */
export async function startTcpProxy(
  target: string,
  pair: (client: Socket, upstream: Socket) => void,
): Promise<TcpProxy> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = new Socket();
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    pair(client, upstream);
    upstream.connect(Number(port), hostname);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
