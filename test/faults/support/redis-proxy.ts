import { createServer, Socket, type AddressInfo } from 'node:net';

/**
 * A TCP proxy in front of Redis that loses one reply: the first time a client sends a command
 * containing one of `markers` and Redis answers it with anything but `-NOSCRIPT`, the proxy drops that
 * answer and cuts the connection, as a Redis restart or a network cut right after Redis executed
 * the command would. The client cannot tell whether the command ran.
 */
export interface ReplyDroppingProxy {
  readonly url: string;
  /** Whether the reply was dropped yet. */
  dropped(): boolean;
  close(): Promise<void>;
}

/** Starts the proxy in front of the Redis at `target` (`redis://host:port`). */
export async function startReplyDroppingProxy(
  target: string,
  markers: readonly string[],
): Promise<ReplyDroppingProxy> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  let dropped = false;
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
    let armed = false;
    client.on('data', (chunk: Buffer) => {
      if (!dropped && markers.some((marker) => chunk.includes(marker))) armed = true;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (armed && !dropped && !chunk.subarray(0, 9).toString().startsWith('-NOSCRIPT')) {
        dropped = true;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    upstream.connect(Number(port), hostname);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${address.port}`,
    dropped: () => dropped,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
