import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';

/** `each`: set up before each test and torn down after it; `all`: once for the describe (or file). */
export type HookScope = 'each' | 'all';

/** The before and after hook of `scope`. */
export function hooksOf(scope: HookScope = 'each'): readonly [typeof beforeAll, typeof afterAll] {
  return scope === 'all' ? [beforeAll, afterAll] : [beforeEach, afterEach];
}

/**
 * Opens what `open` returns before each test (or once, `scope` `all`) and closes it after. Returns
 * a getter, since it exists only once the hook ran. After-hooks run in reverse, so what is opened
 * on a namespace is closed before the namespace (registered earlier) is cleaned up.
 */
export function useOpened<T extends { close(): Promise<unknown> }>(
  what: string,
  open: () => T | Promise<T>,
  scope: HookScope = 'each',
): () => T {
  const [before, after] = hooksOf(scope);
  let current: T | undefined;
  before(async () => {
    current = await open();
  });
  after(async () => {
    await current?.close();
    current = undefined;
  });
  return () => {
    if (!current) throw new Error(`useOpened('${what}'): it is open inside a test only`);
    return current;
  };
}
