import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { Config } from '../config/index.js';
import { webhookSubscriptionsKey } from '../redis/keys.js';
import { newSecret } from './signature.js';

/**
 * Webhook subscriptions: the static one of `WEBHOOK_URL`, and the managed ones (`webhook add`,
 * `POST /v1/webhooks`) kept in one Redis hash with their secrets. Nothing here logs a secret, and
 * every view meant for people leaves it out.
 */

/** One subscription, with its secret: what a deliverer signs with. */
export interface Subscription {
  readonly id: string;
  readonly url: string;
  readonly secret: string;
  /** Only events of these projects; every project when empty. */
  readonly projects: readonly string[];
  /** Only events of these types (`followup.completed`, or `followup.*`); every type when empty. */
  readonly types: readonly string[];
  /** Epoch ms by Redis's clock: it gets the events published from then on. */
  readonly createdAt: number;
  /** Epoch ms at which the receiver answered 410 Gone: nothing is sent to it any more. */
  readonly disabledAt?: number | undefined;
  /** `static`: set by `WEBHOOK_URL`; `managed`: added by an operator. */
  readonly kind: 'static' | 'managed';
}

/** A subscription as listed: without its secret. */
export type SubscriptionView = Omit<Subscription, 'secret'>;

const storedSchema = z.object({
  id: z.string(),
  url: z.string(),
  secret: z.string().optional(),
  projects: z.array(z.string()).default([]),
  types: z.array(z.string()).default([]),
  createdAt: z.number().default(0),
  disabledAt: z.number().optional(),
});

/** Leaves the secret out. */
export function viewOf({ secret: _secret, ...view }: Subscription): SubscriptionView {
  return view;
}

/** Whether `subscription` wants an event of `type` and `projectId` published at `publishedAt`. */
export function wants(
  subscription: Subscription,
  event: { type: string; projectId: string; publishedAt: number },
): boolean {
  if (subscription.disabledAt !== undefined) return false;
  if (event.publishedAt < subscription.createdAt) return false;
  if (subscription.projects.length > 0 && !subscription.projects.includes(event.projectId))
    return false;
  return (
    subscription.types.length === 0 ||
    subscription.types.some((t) =>
      t.endsWith('.*') ? event.type.startsWith(t.slice(0, -1)) : t === event.type,
    )
  );
}

/**
 * The id of the static subscription: it names the URL, so that a changed `WEBHOOK_URL` is a new
 * subscription (a 410 of the old one does not disable the new one).
 */
export function staticId(url: string): string {
  return `static_${createHash('sha256').update(url).digest('hex').slice(0, 8)}`;
}

/** The subscriptions of one deployment, in Redis. */
export class SubscriptionStore {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #static: Subscription | undefined;

  constructor(redis: Redis, config: Pick<Config, 'prefix' | 'webhookUrl' | 'webhookSecret'>) {
    this.#redis = redis;
    this.#key = webhookSubscriptionsKey(config.prefix);
    const { webhookUrl: url, webhookSecret: secret } = config;
    this.#static =
      url && secret
        ? { id: staticId(url), url, secret, projects: [], types: [], createdAt: 0, kind: 'static' }
        : undefined;
  }

  /** Every subscription, with secrets, the static one first. */
  async all(): Promise<Subscription[]> {
    const stored = await this.#redis.hgetall(this.#key);
    const managed: Subscription[] = [];
    let staticOne = this.#static;
    for (const [id, text] of Object.entries(stored)) {
      const parsed = storedSchema.safeParse(JSON.parse(text));
      if (!parsed.success) continue;
      const record = parsed.data;
      // The static one is kept in the hash only as its disabled mark.
      if (staticOne && id === staticOne.id)
        staticOne = { ...staticOne, disabledAt: record.disabledAt };
      else if (record.secret) managed.push({ ...record, secret: record.secret, kind: 'managed' });
    }
    return [
      ...(staticOne ? [staticOne] : []),
      ...managed.sort((a, b) => a.createdAt - b.createdAt),
    ];
  }

  /** Adds a managed subscription; resolves to it, with its new secret (shown once). */
  async add(input: {
    url: string;
    projects: readonly string[];
    types: readonly string[];
  }): Promise<Subscription> {
    const [seconds, micros] = await this.#redis.time();
    const subscription: Subscription = {
      id: `sub_${randomBytes(8).toString('hex')}`,
      url: input.url,
      secret: newSecret(),
      projects: [...input.projects],
      types: [...input.types],
      createdAt: Number(seconds) * 1000 + Math.floor(Number(micros) / 1000),
      kind: 'managed',
    };
    const { kind: _kind, ...stored } = subscription;
    await this.#redis.hset(this.#key, subscription.id, JSON.stringify(stored));
    return subscription;
  }

  /** Removes a managed subscription; resolves to whether it existed. */
  async remove(id: string): Promise<boolean> {
    return (await this.#redis.hdel(this.#key, id)) === 1;
  }

  /** Marks a subscription disabled (its receiver answered 410): nothing more is sent to it. */
  async disable(subscription: Subscription, at: number): Promise<void> {
    const { kind: _kind, secret, ...rest } = subscription;
    // The static one's secret stays in the environment; only its mark is stored.
    const stored = subscription.kind === 'static' ? rest : { ...rest, secret };
    await this.#redis.hset(
      this.#key,
      subscription.id,
      JSON.stringify({ ...stored, disabledAt: at }),
    );
  }
}
