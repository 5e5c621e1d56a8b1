import { afterEach, beforeEach } from 'vitest';
import { DispatchStore } from '../../src/store/store.js';
import { createProducer, type Producer } from '../../src/producer/index.js';
import { keysFor } from '../../src/redis/keys.js';
import { useNamespace, type Namespace } from './namespace.js';

/** A namespace of its own with a producer and a dispatch store on it, for tests of the store. */
export interface StoreFixture {
  readonly ns: Namespace;
  readonly producer: Producer;
  readonly store: DispatchStore;
}

/** Gives each test of the file a fresh {@link StoreFixture} (namespace `label`), cleaned up after. */
export function useStore(label: string): () => StoreFixture {
  const namespace = useNamespace(label);
  let current: StoreFixture | undefined;
  beforeEach(() => {
    const ns = namespace();
    current = {
      ns,
      producer: createProducer({ redisUrl: ns.redisUrl, prefix: ns.prefix }),
      store: new DispatchStore(ns.redis, keysFor(ns.prefix), {
        eventsStream: ns.eventsStream,
        eventsMaxLen: 1000,
        retentionMs: 60_000,
      }),
    };
  });
  afterEach(async () => {
    await current?.producer.close();
    current = undefined;
  });
  return () => {
    if (!current) throw new Error('useStore(): the fixture exists inside a test only');
    return current;
  };
}
