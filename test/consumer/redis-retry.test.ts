import { createServer, type AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { retryOnConnectionError } from '../../src/consumer/send.js';
import { isConnectionError } from '../../src/redis/connections.js';
import { retryWrite } from '../../src/store/call-batch.js';

/** A real ioredis error from a connection that cannot be made (a port nobody listens on). */
async function connectionFailure(): Promise<unknown> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  const redis = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0, lazyConnect: true });
  redis.on('error', () => {});
  try {
    return await redis.ping().then(
      () => undefined,
      (err: unknown) => err,
    );
  } finally {
    redis.disconnect();
  }
}

describe('retries of the worker’s own Redis commands', () => {
  it('tells a broken connection from an error of the command itself', async () => {
    const failure = await connectionFailure();
    expect(failure).toBeInstanceOf(Error);
    expect(isConnectionError(failure)).toBe(true);
    expect(isConnectionError(new Error('Connection is closed.'))).toBe(true);
    expect(isConnectionError(Object.assign(new Error('read'), { code: 'ECONNRESET' }))).toBe(true);
    expect(isConnectionError(new Error('ERR Error running script'))).toBe(false);
    expect(isConnectionError('Connection is closed.')).toBe(false);
  });

  it('retries ACQUIRE after a connection error, a bounded number of times', async () => {
    const failure = await connectionFailure();
    let calls = 0;
    const flaky = () => (++calls <= 2 ? Promise.reject(failure) : Promise.resolve('go'));
    expect(await retryOnConnectionError(flaky)).toBe('go');
    expect(calls).toBe(3);

    calls = 0;
    const down = () => (++calls, Promise.reject(failure));
    await expect(retryOnConnectionError(down)).rejects.toBe(failure);
    expect(calls).toBe(5);

    calls = 0;
    const scriptError = new Error('ERR Error running script');
    await expect(retryOnConnectionError(() => (++calls, Promise.reject(scriptError)))).rejects.toBe(
      scriptError,
    );
    expect(calls).toBe(1);
  });

  it('retries recording an outcome for a bounded time, telling of each failure', async () => {
    const errors: number[] = [];
    let calls = 0;
    const result = await retryWrite(
      { budgetMs: 5_000, onError: (_err, retryInMs) => errors.push(retryInMs) },
      () => (++calls < 3 ? Promise.reject(new Error('down')) : Promise.resolve('marked')),
    );
    expect(result).toBe('marked');
    expect(errors).toEqual([100, 200]);

    const started = Date.now();
    const last = new Error('still down');
    await expect(
      retryWrite({ budgetMs: 700, onError: () => {} }, () => Promise.reject(last)),
    ).rejects.toBe(last);
    const tookMs = Date.now() - started;
    expect(tookMs).toBeGreaterThanOrEqual(300);
    expect(tookMs).toBeLessThan(700 + 1_000);
  });
});
