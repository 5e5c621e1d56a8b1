/**
 * How big the fault drills are. `FAULTS_SCALE=full` runs the sizes of issue 7; the default (`ci`)
 * runs the same drills smaller, so the whole suite fits in about six minutes on a 2-core runner.
 */

/** Sizes of one scale. */
export interface Scale {
  readonly name: 'ci' | 'full';
  /** Categories 1 and 2: follow-ups over `projects` x `jobsPerProject` agent jobs, and kills. */
  readonly crash: {
    readonly followUps: number;
    readonly projects: number;
    readonly jobsPerProject: number;
    readonly kills: number;
  };
  /** Category 3: Redis restarts, alternating SIGTERM and SIGKILL. */
  readonly redis: { readonly restarts: number; readonly sendIntervalMs: number };
  /** Category 3, `REDIS_DURABILITY`: Valkey crashes with the AOF cut, per mode. */
  readonly durability: {
    readonly fsyncCrashes: number;
    readonly noneCrashes: number;
    readonly batch: number;
  };
  /** Category 3, failover: follow-ups and primary kills, per deployment (cluster, Sentinel). */
  readonly failover: { readonly followUps: number; readonly kills: number };
  /** Category 4: follow-ups per AMBIGUOUS_RESEND setting, `rounds` to each agent job. */
  readonly api: { readonly followUps: number; readonly projects: number; readonly rounds: number };
  /** Category 5: generated inputs per entry point. */
  readonly fuzz: {
    readonly sends: number;
    readonly batches: number;
    readonly cliFiles: number;
    readonly cliLinesPerFile: number;
    readonly intakeRequests: number;
  };
  /** Category 7: follow-ups pushed through the faults while every role logs at debug. */
  readonly secrets: { readonly followUps: number };
}

const CI: Scale = {
  name: 'ci',
  crash: { followUps: 300, projects: 20, jobsPerProject: 3, kills: 6 },
  redis: { restarts: 4, sendIntervalMs: 25 },
  durability: { fsyncCrashes: 20, noneCrashes: 3, batch: 4 },
  failover: { followUps: 200, kills: 20 },
  api: { followUps: 200, projects: 20, rounds: 2 },
  fuzz: { sends: 4_000, batches: 250, cliFiles: 2, cliLinesPerFile: 1_000, intakeRequests: 250 },
  secrets: { followUps: 60 },
};

const FULL: Scale = {
  name: 'full',
  crash: { followUps: 1_000, projects: 20, jobsPerProject: 5, kills: 20 },
  redis: { restarts: 8, sendIntervalMs: 15 },
  durability: { fsyncCrashes: 20, noneCrashes: 5, batch: 8 },
  failover: { followUps: 200, kills: 20 },
  api: { followUps: 1_000, projects: 20, rounds: 5 },
  fuzz: { sends: 10_000, batches: 600, cliFiles: 3, cliLinesPerFile: 3_000, intakeRequests: 800 },
  secrets: { followUps: 200 },
};

const BASE: Scale = process.env['FAULTS_SCALE'] === 'full' ? FULL : CI;

/** `DURABILITY_CRASHES` overrides the crash count of the fsync drill, to dig into it quicker. */
const crashes = Number(process.env['DURABILITY_CRASHES'] ?? NaN);

/** `FAILOVER_KILLS` overrides the kills of the failover drills (20 at either scale, as issue 33 asks). */
const failoverKills = Number(process.env['FAILOVER_KILLS'] ?? NaN);

const WITH_CRASHES: Scale =
  Number.isInteger(crashes) && crashes > 0
    ? { ...BASE, durability: { ...BASE.durability, fsyncCrashes: crashes } }
    : BASE;

/** The scale of this run, from `FAULTS_SCALE` (`ci` when unset). */
export const SCALE: Scale =
  Number.isInteger(failoverKills) && failoverKills > 0
    ? { ...WITH_CRASHES, failover: { ...WITH_CRASHES.failover, kills: failoverKills } }
    : WITH_CRASHES;
