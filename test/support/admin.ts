import { createAdmin, type Admin } from '../../src/producer/index.js';
import type { Namespace } from './namespace.js';

/**
 * The operator controls (`createAdmin`) of a test namespace: its prefix and events stream, and
 * `sendRateLimit` as the roles of the test run with it. Close it when done.
 */
export function adminOf(ns: Namespace, sendRateLimit = '100/1h'): Admin {
  return createAdmin({
    redisUrl: ns.redisUrl,
    prefix: ns.prefix,
    eventsStream: ns.eventsStream,
    sendRateLimit,
  });
}
