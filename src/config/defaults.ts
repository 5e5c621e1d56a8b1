import type { z } from 'zod';
import { SETTINGS, type SettingName } from './settings.js';

/**
 * The settings' defaults, parsed: what the service runs with when a setting is unset, and what the
 * library (`createProducer`, `createAdmin`, `createEventReader`) uses for an option left out. The
 * values are written once, in the settings table; nothing else in src/ repeats them.
 */

/** A setting that has a default. */
export type DefaultedSetting = {
  [K in SettingName]: (typeof SETTINGS)[K] extends { readonly default: string } ? K : never;
}[SettingName];

/** The parsed default of setting `name`, as `loadConfig` parses it when the setting is unset. */
export function settingDefault<K extends DefaultedSetting>(
  name: K,
): z.output<(typeof SETTINGS)[K]['schema']> {
  const setting = SETTINGS[name];
  return (setting.schema as z.ZodType).parse(setting.default) as z.output<
    (typeof SETTINGS)[K]['schema']
  >;
}

/** The defaults of the library's options, each the default of the setting it stands for. */
export const LIBRARY_DEFAULTS = Object.freeze({
  /** `DISPATCH_PREFIX` */
  prefix: settingDefault('DISPATCH_PREFIX'),
  /** `EVENTS_STREAM` */
  eventsStream: settingDefault('EVENTS_STREAM'),
  /** `EVENTS_MAXLEN` */
  eventsMaxLen: settingDefault('EVENTS_MAXLEN'),
  /** `DISPATCH_RETENTION`, in ms */
  dispatchRetentionMs: settingDefault('DISPATCH_RETENTION'),
  /** `PROMPT_MAX_BYTES` */
  promptMaxBytes: settingDefault('PROMPT_MAX_BYTES'),
  /** `SEND_ATTEMPTS` */
  sendAttempts: settingDefault('SEND_ATTEMPTS'),
  /** `DISPATCH_SHARDS`: the count when neither the caller nor the fleet's record gives one. */
  shards: settingDefault('DISPATCH_SHARDS'),
  /** `REDIS_CLUSTER` */
  cluster: settingDefault('REDIS_CLUSTER'),
  /** `REDIS_DURABILITY` */
  durability: Object.freeze(settingDefault('REDIS_DURABILITY')),
  /** `SEND_RATE_LIMIT` */
  sendRateLimit: Object.freeze(settingDefault('SEND_RATE_LIMIT')),
});

/**
 * Where a library object (a producer, an admin, an event reader) keeps the options it resolved:
 * a non-enumerable property under a symbol no caller knows, for the test that checks each option
 * left out is `LIBRARY_DEFAULTS`' value. Not part of the public API.
 */
const RESOLVED = Symbol('agent-dispatch resolved options');

/** `target` with `resolved` kept under {@link RESOLVED}; returns `target`. */
export function keepResolved<T extends object>(target: T, resolved: object): T {
  Object.defineProperty(target, RESOLVED, { value: Object.freeze({ ...resolved }) });
  return target;
}

/** The options `target` resolved (see {@link keepResolved}), or `undefined`. */
export function resolvedOf(target: object): Readonly<Record<string, unknown>> | undefined {
  return (target as { [RESOLVED]?: Readonly<Record<string, unknown>> })[RESOLVED];
}
