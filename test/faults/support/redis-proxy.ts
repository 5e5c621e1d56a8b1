import { startTcpProxy } from './tcp-proxy.js';

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
  let dropped = false;
  const proxy = await startTcpProxy(target, (client, upstream) => {
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
  });
  return { url: proxy.url, dropped: () => dropped, close: proxy.close };
}
