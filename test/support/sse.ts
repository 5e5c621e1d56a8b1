import { eventually } from './namespace.js';

/**
 * A server-sent-events client for tests: reads a `text/event-stream` response with fetch and
 * parses it as the EventSource specification does (fields `id`, `data`, comment lines), keeping
 * every message and comment in arrival order.
 */

/** One message of the stream: its `id:` (the last one seen) and its `data:` parsed as JSON. */
export interface SseMessage {
  readonly id: string;
  readonly data: Record<string, unknown>;
}

/** An open stream. */
export interface SseClient {
  readonly status: number;
  readonly messages: SseMessage[];
  readonly comments: string[];
  /** The last `id:` received, with or without data (what a reconnect sends as Last-Event-ID). */
  readonly lastEventId: () => string;
  /** Resolves once the server ended the stream. */
  readonly ended: Promise<void>;
  /** Waits for at least `count` messages (deadline `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<SseMessage[]>;
  /** Disconnects (the client leaves). */
  close(): void;
}

/** Opens `url` with `headers`; resolves once the response headers came. */
export async function openSse(url: string, headers: Record<string, string>): Promise<SseClient> {
  const controller = new AbortController();
  const res = await fetch(url, { headers, signal: controller.signal });
  const messages: SseMessage[] = [];
  const comments: string[] = [];
  let lastId = '';
  const ended = (async () => {
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let data: string | undefined;
          for (const line of frame.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('id: ')) lastId = line.slice(4);
            else if (line.startsWith('data: ')) data = (data ?? '') + line.slice(6);
          }
          if (data !== undefined)
            messages.push({ id: lastId, data: JSON.parse(data) as Record<string, unknown> });
        }
      }
    } catch {
      // Aborted by close(): the stream ends here.
    }
  })();
  return {
    status: res.status,
    messages,
    comments,
    lastEventId: () => lastId,
    ended,
    waitFor: (count, timeoutMs = 20_000) =>
      eventually(() => (messages.length >= count ? messages.slice() : undefined), {
        timeoutMs,
        what: `${count} server-sent events`,
      }),
    close: () => controller.abort(),
  };
}
