import type { Rate } from '../config/index.js';
import { budgetRate } from '../dispatch/budget.js';
import { compareIds } from '../store/event-reader.js';
import type { DeadLetter, DispatchStore, EventView, TrackedView } from '../store/store.js';
import { projectView, type ProjectView } from './controls.js';

/**
 * What the operator's page shows at once (`admin.overview()`): the projects with a control or an
 * open follow-up (a page of them), with their budget use, pause, park and counts; the oldest
 * queued follow-ups; the tracked ones with their job's last status; the dead letters; the last
 * events; the fleet-wide send pause. What it reads does not grow with the backlog: the counts are
 * the ones the scripts keep (`FollowupViews.openCounts`), and no list of open follow-ups is walked.
 */

/** Projects shown per page; the controlled ones first. */
export const PROJECTS_PER_PAGE = 100;

/** One queued follow-up, oldest first: the ones an operator may cancel. */
export interface QueuedView {
  readonly dispatchId: string;
  readonly projectId: string;
  readonly jobId: string;
  readonly enqueuedAt: number;
}

/** The operator's page's data. Times are epoch ms. */
export interface Overview {
  readonly at: number;
  /** The fleet-wide pause of every send (a rejected key, a wrong AGENT_API_URL), or null. */
  readonly sendPause: { readonly httpStatus: number; readonly probeAt: number } | null;
  readonly projects: readonly ProjectView[];
  /** How many projects have a control or an open follow-up, of which `projects` is one page. */
  readonly projectsTotal: number;
  /** The page of `projects`, from 0, of {@link PROJECTS_PER_PAGE}. */
  readonly projectsPage: number;
  /** Always true: the counts are the ones the scripts keep, exact. */
  readonly countsExact: boolean;
  readonly queued: readonly QueuedView[];
  readonly tracked: readonly TrackedView[];
  readonly trackedTotal: number;
  readonly events: readonly EventView[];
  /** The newest dead letters (ended undeliverable or timed out, prompt kept for a redrive). */
  readonly deadLetters: readonly DeadLetter[];
  readonly deadLettersTotal: number;
  /**
   * The parts that could not be read as stored (a key of the wrong type, say), each `invalid
   * stored ...`: they show empty, and the rest of the page is shown all the same.
   */
  readonly problems: readonly string[];
}

/** Sizes of the lists; each has a default. */
export interface OverviewOptions {
  /** @defaultValue 20 */
  readonly queued?: number;
  /** @defaultValue 50 */
  readonly tracked?: number;
  /** @defaultValue 20 */
  readonly events?: number;
  /** @defaultValue 20 */
  readonly deadLetters?: number;
  /** Which page of projects, from 0. @defaultValue 0 */
  readonly projectsPage?: number;
}

/** The projects of `store` the page lists: the controlled ones, then those with open follow-ups. */
export async function projectNames(store: DispatchStore): Promise<string[]> {
  const [controlled, counts] = await Promise.all([
    store.projects.controlled(),
    store.followups.openCounts(),
  ]);
  return [...new Set([...controlled.sort(), ...[...counts.keys()].sort()])];
}

/**
 * Reads the {@link Overview} from `store`; `defaultRate` is `SEND_RATE_LIMIT`. `only`: the
 * projects to show (a page across shards, see `createAdmin`); otherwise the page of
 * `options.projectsPage`.
 */
export async function readOverview(
  store: DispatchStore,
  defaultRate: Rate,
  options: OverviewOptions = {},
  only?: ReadonlySet<string>,
): Promise<Overview> {
  const problems: string[] = [];
  const page = options.projectsPage ?? 0;
  const [counts, controlled, queued, trackedPage, events, dead, sendPause] = await Promise.all([
    stored(problems, 'open counts', store.followups.openCounts(), new Map()),
    stored(problems, 'set of controlled projects', store.projects.controlled(), []),
    stored(problems, 'dispatch queue', store.followups.oldestQueued(options.queued ?? 20), []),
    stored(problems, 'tracked set', store.views.trackedPage(options.tracked ?? 50), {
      tracked: [],
      total: 0,
    }),
    stored(problems, 'events stream', store.views.lastEvents(options.events ?? 20), []),
    stored(problems, 'dead letters', store.followups.deadLetters(options.deadLetters ?? 20), {
      items: [],
      total: 0,
    }),
    stored(problems, 'send pause', store.pause.current(), undefined),
  ]);
  const names = [...new Set([...controlled.sort(), ...[...counts.keys()].sort()])];
  const shown = only
    ? names.filter((n) => only.has(n))
    : names.slice(page * PROJECTS_PER_PAGE, (page + 1) * PROJECTS_PER_PAGE);
  const defaults = budgetRate(defaultRate);
  const states = (
    await Promise.all(
      shown.map((p) => stored(problems, `project ${p}`, store.projects.show(p, defaults, 0), null)),
    )
  ).filter((state) => state !== null);
  const projects = states.map((state) => ({
    ...projectView(state, defaultRate),
    ...(counts.get(state.projectId) ?? { queued: 0, sending: 0, tracked: 0 }),
    countsExact: true,
  }));
  return {
    at: states[0]?.nowMs ?? Date.now(),
    sendPause: sendPause ? { httpStatus: sendPause.httpStatus, probeAt: sendPause.probeAt } : null,
    projects,
    projectsTotal: names.length,
    projectsPage: page,
    countsExact: true,
    queued,
    tracked: trackedPage.tracked,
    trackedTotal: trackedPage.total,
    events,
    deadLetters: dead.items,
    deadLettersTotal: dead.total,
    problems,
  };
}

/**
 * `read`'s value, or `empty` when Redis refused it for what the keys hold (a reply error such as
 * WRONGTYPE, or a script that failed on a value): noted in `problems`, so that one bad key does
 * not take the whole page down. A failure to reach Redis is rethrown.
 */
async function stored<T, E>(
  problems: string[],
  what: string,
  read: Promise<T>,
  empty: E,
): Promise<T | E> {
  try {
    return await read;
  } catch (err) {
    if (!(err instanceof Error) || err.name !== 'ReplyError') throw err;
    problems.push(`invalid stored ${what}: ${err.message.slice(0, 200)}`);
    return empty;
  }
}

/**
 * One {@link Overview} of several shards' (each read by {@link readOverview} from its own store):
 * every shard's projects, the oldest queued, the tracked due soonest, the newest events.
 */
export function mergeOverviews(
  parts: readonly Overview[],
  options: OverviewOptions = {},
): Overview {
  const [first] = parts;
  if (parts.length === 1 && first) return first;
  const all = <T>(pick: (o: Overview) => readonly T[]) => parts.flatMap(pick);
  return {
    at: Math.max(...parts.map((o) => o.at)),
    sendPause: parts.find((o) => o.sendPause)?.sendPause ?? null,
    projects: all((o) => o.projects),
    projectsTotal: parts.reduce((sum, o) => sum + o.projectsTotal, 0),
    projectsPage: first?.projectsPage ?? 0,
    deadLetters: all((o) => o.deadLetters)
      .sort((a, b) => b.finishedAt - a.finishedAt)
      .slice(0, options.deadLetters ?? 20),
    deadLettersTotal: parts.reduce((sum, o) => sum + o.deadLettersTotal, 0),
    countsExact: parts.every((o) => o.countsExact),
    queued: all((o) => o.queued)
      .sort((a, b) => a.enqueuedAt - b.enqueuedAt)
      .slice(0, options.queued ?? 20),
    tracked: all((o) => o.tracked)
      .sort((a, b) => a.nextReadAt - b.nextReadAt)
      .slice(0, options.tracked ?? 50),
    trackedTotal: parts.reduce((sum, o) => sum + o.trackedTotal, 0),
    problems: all((o) => o.problems),
    events: all((o) => o.events)
      .sort((a, b) => compareIds(b.id, a.id))
      .slice(0, options.events ?? 20),
  };
}

/**
 * The overview of every shard's `stores`: one page (`projectsPage`) of the projects of every
 * shard in one order, each shard showing its own of them.
 */
export async function overviewOfShards(
  stores: readonly DispatchStore[],
  defaultRate: Parameters<typeof readOverview>[1],
  options: OverviewOptions,
): Promise<Overview> {
  const [one] = stores;
  if (stores.length === 1 && one) return readOverview(one, defaultRate, options);
  const names = [...new Set((await Promise.all(stores.map((s) => projectNames(s)))).flat())];
  const from = (options.projectsPage ?? 0) * PROJECTS_PER_PAGE;
  const page = names.slice(from, from + PROJECTS_PER_PAGE);
  const only = new Set(page);
  const parts = await Promise.all(stores.map((s) => readOverview(s, defaultRate, options, only)));
  const merged = mergeOverviews(parts, options);
  const rank = new Map(page.map((name, i) => [name, i]));
  const projects = merged.projects.toSorted(
    (a, b) => (rank.get(a.projectId) ?? 0) - (rank.get(b.projectId) ?? 0),
  );
  return { ...merged, projects, projectsTotal: names.length };
}
