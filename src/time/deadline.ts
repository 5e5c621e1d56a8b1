/**
 * Waiting with an end: the one timeout race, the one sleep and the one wait for a stop signal of
 * every role, server and command. Nothing here imports the rest of the project, so any folder may
 * use it.
 */

/**
 * Settles as `promise` does, or, if it has not settled within `ms`, as `onTimeout` does: with its
 * result, or rejected with what it throws. The timer is cleared either way, so a settled race keeps
 * no process alive. `promise` itself runs on; a caller that abandons it handles its rejection.
 */
export async function within<T>(promise: Promise<T>, ms: number, onTimeout: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<T>((resolve, reject) => {
    timer = setTimeout(() => {
      try {
        resolve(onTimeout());
      } catch (err) {
        reject(err);
      }
    }, ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves after `ms`, without keeping the process alive for it. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** Resolves when `signal` aborts (at once if it already has): the first SIGTERM/SIGINT. */
export function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}
