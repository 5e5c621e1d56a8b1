import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { keepResolved, type Config } from '../config/index.js';
import { budgetRate } from '../dispatch/budget.js';
import type { DispatchStore } from '../store/store.js';
import { shardOf } from '../redis/keys.js';
import type { Admin, AdminOptions } from './admin-api.js';
import { cancelFollowUp, checkId, checkLimit, projectView, type ProjectView } from './controls.js';
import { controlFailure } from './disk.js';
import { guardCalls } from './errors.js';
import { openTool } from './tool.js';
import { deadLettersOf, followUpOf, searchFollowUps } from './followup-lookup.js';
import { overviewOfShards } from './overview.js';
import { rateOf, wakeAll } from './admin-parts.js';
import { createProducer } from './producer.js';
import { redriveMany, type NotRedrivableError, type RedriveResult } from './redrive.js';
import { checkRedriveFilter, REDRIVE_LIMIT_MAX, type RedriveFilter } from './redrive-filter.js';
import { redrivePages } from './redrive-pages.js';
import type { Producer } from './api.js';

/** One shard as the controls use it: its dispatch queue, its store on the admin's connection. */
interface AdminShard {
  readonly queue: Queue;
  readonly store: DispatchStore;
}

/** Creates the operator controls. Its connection fails fast, like the producer's. */
export function createAdmin(options: AdminOptions): Admin {
  const defaultRate = rateOf(options.sendRateLimit);
  const { redis, disk, fleet, resolved } = openTool(options, 'admin');
  let closing: Promise<void> | undefined;
  // The producer a redrive sends with, on the admin's connection; made on first use.
  let producer: Producer | undefined;
  const redriver = () =>
    (producer ??= createProducer({
      ...options,
      connection: redis,
      // The prompt was accepted once; PROMPT_MAX_BYTES is checked again before its send.
      promptMaxBytes: Number.MAX_SAFE_INTEGER,
    }));

  /** Every shard, each with its store on the admin's connection. */
  async function shards() {
    return (await fleet.shards()).map((s) => ({ queue: s.queue, store: s.store(redis) }));
  }

  /**
   * Runs `call` on the shards once Redis is reachable and the layout read (see `fleetOf`), Redis
   * failures mapped; a `LayoutError` is rethrown as it is. A change (`kept`: what may be kept when
   * its wait for the disk fails) is refused first when a strict `REDIS_DURABILITY` cannot be kept.
   */
  async function run<T>(call: (all: AdminShard[]) => Promise<T>, kept?: string) {
    const all = await shards();
    try {
      if (kept !== undefined) await disk.assess(redis);
      return await call(all);
    } catch (err) {
      throw controlFailure(err, redis, kept ?? '');
    }
  }

  const shardOfProject = (all: AdminShard[], projectId: string) =>
    all[shardOf(projectId, all.length)] ?? (all[0] as AdminShard);

  /** Runs the change `call` on the shard of `projectId`. */
  const inShardOf = <T>(projectId: string, call: (shard: AdminShard) => Promise<T>) =>
    run(
      (all) => call(shardOfProject(all, projectId)),
      'the change may or may not be kept: retry it',
    );

  async function setLimit(projectIdInput: string, limit: string | undefined, force = false) {
    const projectId = checkId('projectId', projectIdInput);
    const parsed = limit === undefined ? undefined : checkLimit(limit, defaultRate, force);
    const { previous } = await inShardOf(projectId, async ({ store, queue }) => {
      const rate = parsed && { text: parsed.text, rate: budgetRate(parsed.rate) };
      const changed = await store.projects.setLimit(projectId, rate);
      // Follow-ups asleep until a slot of the old limit reserve one of the new limit now.
      await wakeAll(queue, changed.reservedBy);
      return changed;
    });
    return { projectId, limit: parsed?.text ?? null, previous: previous ?? null };
  }

  async function showProject(projectIdInput: string): Promise<ProjectView> {
    const projectId = checkId('projectId', projectIdInput);
    const state = await run((all) =>
      shardOfProject(all, projectId).store.projects.show(projectId, budgetRate(defaultRate)),
    );
    return projectView(state, defaultRate);
  }

  const redriveKept = 'the redrive may or may not be kept: redrive again (it is idempotent)';

  async function redriveIds(dispatchIds: readonly string[]) {
    const ids = [...dispatchIds].map((id) => checkId('dispatchId', id));
    const answers = await run((all) => redriveMany(all, redriver(), ids), redriveKept);
    return answers as (RedriveResult | NotRedrivableError)[];
  }

  /** The pages of a redrive of `filter`, on the shards it can match (a project's one). */
  async function* redriveEach(filter: RedriveFilter, limitMax = Number.MAX_SAFE_INTEGER) {
    const checked = checkRedriveFilter(filter, limitMax);
    const { projectId } = checked;
    const all = await shards();
    const pages = redrivePages(
      projectId === undefined ? all : [shardOfProject(all, projectId)],
      redriver(),
      checked,
    );
    for (;;) {
      const page = await run(() => pages.next(), checked.dryRun ? undefined : redriveKept);
      if (page.done) return;
      yield page.value;
    }
  }

  const admin = guardCalls<Admin>(
    {
      async pauseProject(projectIdInput) {
        const projectId = checkId('projectId', projectIdInput);
        const { changed } = await inShardOf(projectId, ({ store }) =>
          store.projects.pause(projectId),
        );
        return { projectId, paused: true, changed, woken: 0 };
      },
      async resumeProject(projectIdInput) {
        const projectId = checkId('projectId', projectIdInput);
        return inShardOf(projectId, async ({ store, queue }) => {
          const { changed, parked } = await store.projects.resume(projectId);
          await wakeAll(queue, parked);
          return { projectId, paused: false, changed, woken: parked.length };
        });
      },
      setProjectLimit: (projectId, limit, limitOptions) =>
        setLimit(projectId, limit ?? '', limitOptions?.force === true),
      clearProjectLimit: (projectId) => setLimit(projectId, undefined),
      async unparkProject(projectIdInput) {
        const projectId = checkId('projectId', projectIdInput);
        return inShardOf(projectId, async ({ store, queue }) => {
          const { parkedUntil, waiting } = await store.projects.unpark(projectId);
          await wakeAll(queue, waiting);
          const until = parkedUntil === undefined ? null : new Date(parkedUntil).toISOString();
          return { projectId, parkedUntil: until, changed: until !== null, woken: waiting.length };
        });
      },
      showProject,
      project: showProject,
      controlledProjects: () =>
        run(async (all) => {
          const each = await Promise.all(all.map((s) => s.store.projects.controlled()));
          return each.flat().sort();
        }),
      overview: (overviewOptions = {}) =>
        run((all) =>
          overviewOfShards(
            all.map((s) => s.store),
            defaultRate,
            overviewOptions,
          ),
        ),
      cancel: (dispatchIdInput) => {
        const dispatchId = checkId('dispatchId', dispatchIdInput);
        return run(async (all) => {
          // The id does not name its shard: the one that holds the record ends it.
          const found = await Promise.all(all.map((s) => s.store.sends.get(dispatchId)));
          const at = found.findIndex((r) => r !== undefined);
          return cancelFollowUp(all[Math.max(0, at)] ?? (all[0] as AdminShard), dispatchId);
        }, 'the cancel may or may not be kept: see status');
      },
      redriveMany: redriveIds,
      redriveEach: (filter = {}) => redriveEach(filter),
      async redriveDeadLetters(filter = {}) {
        const answers = [];
        for await (const page of redriveEach(filter, REDRIVE_LIMIT_MAX)) answers.push(...page);
        return answers;
      },
      async redrive(dispatchId) {
        const [answer] = await redriveIds([dispatchId]);
        if (!answer || answer instanceof Error) throw answer as NotRedrivableError;
        return answer satisfies RedriveResult;
      },
      deadLetters: (filter = {}) => run((all) => deadLettersOf(all, filter)),
      followUp: (dispatchIdInput) => {
        const dispatchId = checkId('dispatchId', dispatchIdInput);
        return run((all) => followUpOf(all, dispatchId));
      },
      search: (text) => run((all) => searchFollowUps(all, String(text))),
      close() {
        closing ??= (async () => {
          await producer?.close();
          await fleet.close();
          if (!options.connection) redis.disconnect();
        })();
        return closing;
      },
    },
    redis,
  );
  return keepResolved(admin, { ...resolved, sendRateLimit: defaultRate });
}

/** The controls of a process, from its config (`connection`: one of its own, left open). */
export function adminFor(config: Config, connection?: Redis): Admin {
  return createAdmin({
    redisUrl: config.redisUrl ?? '',
    ...(connection ? { connection } : {}),
    prefix: config.prefix,
    eventsStream: config.eventsStream,
    eventsMaxLen: config.eventsMaxLen,
    dispatchRetentionMs: config.dispatchRetentionMs,
    ...(config.shardCountSet ? { shards: config.shardCount } : {}),
    cluster: config.redisCluster,
    sendRateLimit: config.sendRateLimit,
    durability: config.durability,
  });
}
