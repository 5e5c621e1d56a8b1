import type { Rate } from '../config/index.js';
import { budgetRate } from '../dispatch/budget.js';
import { compareIds } from '../store/event-reader.js';
import type { DispatchStore, EventView, TrackedView } from '../store/store.js';
import { projectView, type ProjectView } from './controls.js';

/**
 * What the operator's page shows at once (`admin.overview()`): every project with a control or an
 * open follow-up, with its budget use, pause and park; the oldest queued follow-ups; the tracked
 * ones with their job's last status; the last events; the fleet-wide send pause.
 */

/** Open follow-ups read at most to count each project's (see `OpenIndex.first`). */
const OPEN_SCAN = 5_000;
/** Projects shown at most; the controlled ones first. */
const MAX_PROJECTS = 100;

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
  /** False when there were more open follow-ups than were read to count them. */
  readonly countsExact: boolean;
  readonly queued: readonly QueuedView[];
  readonly tracked: readonly TrackedView[];
  readonly trackedTotal: number;
  readonly events: readonly EventView[];
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
}

/** Reads the {@link Overview} from `store`; `defaultRate` is `SEND_RATE_LIMIT`. */
export async function readOverview(
  store: DispatchStore,
  defaultRate: Rate,
  options: OverviewOptions = {},
): Promise<Overview> {
  const problems: string[] = [];
  const [open, controlled, trackedPage, events, sendPause] = await Promise.all([
    stored(problems, 'open index', store.open.first(OPEN_SCAN), {
      dispatches: [],
      complete: false,
    }),
    stored(problems, 'set of controlled projects', store.projects.controlled(), []),
    stored(problems, 'tracked set', store.views.trackedPage(options.tracked ?? 50), {
      tracked: [],
      total: 0,
    }),
    stored(problems, 'events stream', store.views.lastEvents(options.events ?? 20), []),
    stored(problems, 'send pause', store.pause.current(), undefined),
  ]);
  const counts = new Map<string, { queued: number; sending: number; tracked: number }>();
  const queued: QueuedView[] = [];
  // The walk reads lanes of one by project, not by age.
  const byAge = open.dispatches.toSorted((a, b) => a.enqueuedAt - b.enqueuedAt);
  for (const d of byAge) {
    if (!d.state || d.state === 'done') continue;
    const c = counts.get(d.projectId) ?? { queued: 0, sending: 0, tracked: 0 };
    counts.set(d.projectId, c);
    if (d.state === 'queued') {
      c.queued++;
      if (queued.length < (options.queued ?? 20)) queued.push({ ...d });
    } else if (d.state === 'sending') c.sending++;
    else c.tracked++;
  }
  const names = [...new Set([...controlled.sort(), ...[...counts.keys()].sort()])];
  const defaults = budgetRate(defaultRate);
  const states = (
    await Promise.all(
      names
        .slice(0, MAX_PROJECTS)
        .map((p) => stored(problems, `project ${p}`, store.projects.show(p, defaults, 0), null)),
    )
  ).filter((state) => state !== null);
  const projects = states.map((state) => ({
    ...projectView(state, defaultRate),
    ...(counts.get(state.projectId) ?? { queued: 0, sending: 0, tracked: 0 }),
    countsExact: open.complete,
  }));
  return {
    at: states[0]?.nowMs ?? Date.now(),
    sendPause: sendPause ? { httpStatus: sendPause.httpStatus, probeAt: sendPause.probeAt } : null,
    projects,
    countsExact: open.complete,
    queued: queued.map(({ dispatchId, projectId, jobId, enqueuedAt }) => ({
      dispatchId,
      projectId,
      jobId,
      enqueuedAt,
    })),
    tracked: trackedPage.tracked,
    trackedTotal: trackedPage.total,
    events,
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
    projects: all((o) => o.projects).slice(0, MAX_PROJECTS),
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
