import { readdirSync, readFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { pct } from './stats.js';

/**
 * A V8 CPU profile of the bench process over one stretch of work, summarised for a table's
 * "limited by" line: where the busy time went by package or source file, and the inclusive time
 * of a few named functions.
 */

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly children?: readonly number[];
}

interface Profile {
  readonly startTime: number;
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Where busy time went: shares of the sampled busy time (idle excluded). */
export interface ProfileSummary {
  /** By package (`zod`, `ioredis`), source file (`src/dispatch/followup.ts`) or V8 bucket (GC). */
  readonly byModule: readonly { name: string; share: number }[];
  /** Inclusive share of each function asked for, by name. */
  readonly inclusive: ReadonlyMap<string, number>;
}

/** Profiles `work` and summarises the profile; `functions` are reported inclusively. */
export async function profile<T>(
  work: () => Promise<T>,
  functions: readonly string[],
): Promise<{ value: T; summary: ProfileSummary }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 1_000 });
  await session.post('Profiler.start');
  try {
    const value = await work();
    const { profile: taken } = (await session.post('Profiler.stop')) as { profile: Profile };
    return { value, summary: summarise(taken, functions) };
  } finally {
    session.disconnect();
  }
}

/** A stretch of time on the monotonic clock, in µs: `process.hrtime.bigint() / 1000n`. */
export interface Window {
  readonly fromUs: number;
  readonly toUs: number;
}

/** Now on the clock V8 stamps profile samples with (CLOCK_MONOTONIC, shared by processes). */
export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/**
 * Summarises the main thread's profile that `node --cpu-prof --cpu-prof-dir dir` wrote on exit
 * (thread 0; the tsx loader's thread writes its own file, which is left out), counting only the
 * samples taken within `window`, so start-up and shutdown are left out too.
 */
export function summariseFile(
  dir: string,
  functions: readonly string[],
  window: Window,
): ProfileSummary {
  const file = readdirSync(dir).find((name) => /\.0\.\d+\.cpuprofile$/.test(name));
  if (!file) throw new Error(`no main-thread CPU profile in ${dir}`);
  const taken = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
  return summarise(taken, functions, window);
}

function summarise(taken: Profile, functions: readonly string[], window?: Window): ProfileSummary {
  const byId = new Map(taken.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of taken.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const modules = new Map<string, number>();
  const inclusive = new Map(functions.map((f) => [f, 0]));
  let busy = 0;
  let at = taken.startTime;
  taken.samples.forEach((id, i) => {
    const node = byId.get(id);
    const dt = taken.timeDeltas[i] ?? 0;
    at += dt;
    if (window && (at < window.fromUs || at > window.toUs)) return;
    if (!node || node.callFrame.functionName === '(idle)') return;
    busy += dt;
    const name = moduleOf(node.callFrame);
    modules.set(name, (modules.get(name) ?? 0) + dt);
    const seen = new Set<string>();
    for (let up: number | undefined = id; up !== undefined; up = parent.get(up)) {
      const fn = byId.get(up)?.callFrame.functionName ?? '';
      if (inclusive.has(fn) && !seen.has(fn)) {
        seen.add(fn);
        inclusive.set(fn, (inclusive.get(fn) ?? 0) + dt);
      }
    }
  });
  const share = (t: number) => (busy > 0 ? t / busy : 0);
  return {
    byModule: [...modules]
      .map(([name, t]) => ({ name, share: share(t) }))
      .sort((a, b) => b.share - a.share),
    inclusive: new Map([...inclusive].map(([f, t]) => [f, share(t)])),
  };
}

/** `…/node_modules/zod/v4/…` → `zod`; `…/src/x.ts` → `src/x.ts`; V8 buckets stay as named. */
function moduleOf(frame: ProfileNode['callFrame']): string {
  if (frame.url === '') return frame.functionName.startsWith('(') ? frame.functionName : 'native';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(frame.url);
  if (pkg) return pkg[1] as string;
  const own = /\/((?:src|bench|test)\/.+)$/.exec(frame.url);
  if (own) return own[1] as string;
  return frame.url.startsWith('node:') ? 'node core' : frame.url;
}

/** `zod 41 %, (garbage collector) 15 %, …; checkFollowUp 62 % inclusive`. */
export function describeProfile(summary: ProfileSummary, top = 5): string {
  const modules = summary.byModule
    .slice(0, top)
    .map((m) => `${m.name} ${pct(m.share)}`)
    .join(', ');
  const inclusive = [...summary.inclusive].map(([f, share]) => `${f}() ${pct(share)}`).join(', ');
  return `busy time by module: ${modules}${inclusive ? `; inclusive: ${inclusive}` : ''}`;
}
