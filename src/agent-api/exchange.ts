import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import {
  abortReason,
  MAX_RESPONSE_BYTES,
  ResponseTooLargeError,
  WriteDeadlineError,
  type ExchangeFailure,
} from './transport-errors.js';

/**
 * One HTTP exchange through undici's dispatch API, with the one fact `request()` hides: whether the
 * request was handed to a socket. undici calls `onRequestStart` synchronously right before it
 * writes a request to a connected socket (`writeH1`), and never for a request that failed to
 * connect, so "started" means "may have reached the server". The exchange never rejects; the
 * client turns the outcome into an agent job or an error (how it fails: `transport-errors.ts`).
 */

/** What came back: a complete response, or a failure with how far the exchange got. */
export type ExchangeResult =
  | {
      readonly ok: true;
      readonly status: number;
      readonly headers: IncomingHttpHeaders;
      readonly body: Buffer;
    }
  | ExchangeFailure;

/**
 * Runs one request on `dispatcher`; resolves with its {@link ExchangeResult}, never rejects.
 * `writeBy` (`performance.now()` time): when undici is about to write the request later than
 * that, it is aborted unwritten with a {@link WriteDeadlineError}.
 */
export function exchange(
  dispatcher: Dispatcher,
  request: Dispatcher.DispatchOptions,
  signal: AbortSignal | undefined,
  writeBy?: number,
): Promise<ExchangeResult> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve({
        ok: false,
        cause: signal.reason,
        written: false,
        aborted: true,
        status: undefined,
        headers: {},
      });
      return;
    }
    dispatcher.dispatch(request, new ExchangeHandler(resolve, signal, writeBy));
  });
}

/** Collects one response; the body is always read to its end or the request aborted. */
class ExchangeHandler implements Dispatcher.DispatchHandler {
  #written = false;
  #settled = false;
  #status: number | undefined;
  #headers: IncomingHttpHeaders = {};
  #chunks: Buffer[] = [];
  #bytes = 0;
  #controller: Dispatcher.DispatchController | undefined;
  readonly #resolve: (outcome: ExchangeResult) => void;
  readonly #signal: AbortSignal | undefined;
  readonly #writeBy: number | undefined;
  readonly #onAbort = (): void => this.#abort();

  constructor(
    resolve: (outcome: ExchangeResult) => void,
    signal: AbortSignal | undefined,
    writeBy: number | undefined,
  ) {
    this.#resolve = resolve;
    this.#signal = signal;
    this.#writeBy = writeBy;
    signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  onRequestStart(controller: Dispatcher.DispatchController, _context: unknown): void {
    this.#controller = controller;
    // Aborted while queued for a connection: stop here, before undici writes anything.
    if (this.#settled || this.#signal?.aborted) {
      controller.abort(abortReason(this.#signal));
      return;
    }
    // Checked here, synchronously before the write: no stall can come between check and write.
    const lateMs = this.#writeBy === undefined ? 0 : performance.now() - this.#writeBy;
    if (lateMs > 0) {
      controller.abort(new WriteDeadlineError(lateMs));
      return;
    }
    this.#written = true;
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    this.#status = statusCode;
    this.#headers = headers;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#bytes += chunk.length;
    if (this.#bytes > MAX_RESPONSE_BYTES) {
      controller.abort(new ResponseTooLargeError());
      return;
    }
    this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    const status = this.#status ?? 0;
    this.#settle({ ok: true, status, headers: this.#headers, body: Buffer.concat(this.#chunks) });
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.#settle({
      ok: false,
      cause: error,
      written: this.#written,
      aborted: this.#signal?.aborted === true,
      status: this.#status,
      headers: this.#headers,
    });
  }

  #abort(): void {
    if (this.#controller && this.#written) {
      this.#controller.abort(abortReason(this.#signal));
      return;
    }
    // Not written yet: answer the caller now; onRequestStart aborts the request if it ever starts.
    const cause = this.#signal?.reason;
    this.#settle({
      ok: false,
      cause,
      written: false,
      aborted: true,
      status: undefined,
      headers: {},
    });
  }

  #settle(outcome: ExchangeResult): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#chunks = [];
    this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#resolve(outcome);
  }
}
