import type { AgentJob } from '../agent-api/index.js';
import type { RunEnding } from './options.js';

/**
 * The simulated agent's jobs and their lifecycle. An accepted follow-up turns a job `active`
 * (after the stale-terminal delay, if any, during which reads still show the previous state), and
 * after the work time the run ends as the configured outcome. A follow-up to an active job restarts
 * the work timer. One unref'd timer per job, so thousands of jobs cost thousands of timers at most
 * and never keep a process alive.
 */

/** What the lifecycle reads from the simulator's settings; read at each use, so changes apply. */
export interface LifecycleSettings {
  readonly workTimeMs: (projectId: string, jobId: string) => number;
  readonly outcome: (projectId: string, jobId: string, prompt: string) => RunEnding;
  readonly staleTerminalMs: () => number;
}

interface JobRecord {
  readonly projectId: string;
  readonly jobId: string;
  /** The job's real state. */
  job: AgentJob;
  /** What reads show instead of `job` until `shownUntil` (the stale previous state). */
  shown: AgentJob | undefined;
  shownUntil: number;
  /** The latest accepted prompt; it decides the outcome. */
  prompt: string;
  timer: NodeJS.Timeout | undefined;
}

/** Every job of the simulator, by project then job id. */
export class JobStore {
  readonly #projects = new Map<string, Map<string, JobRecord>>();
  readonly #settings: LifecycleSettings;
  #pullRequests = 0;
  #created = 0;

  constructor(settings: LifecycleSettings) {
    this.#settings = settings;
  }

  /** Creates or replaces a job. A job seeded `active` finishes after the work time. */
  seed(projectId: string, jobId: string, fields: Partial<AgentJob> = {}): AgentJob {
    this.#find(projectId, jobId)?.timer?.close();
    const job: AgentJob = { ...defaultJob(projectId, jobId), ...fields };
    const record: JobRecord = {
      projectId,
      jobId,
      job,
      shown: undefined,
      shownUntil: 0,
      prompt: '',
      timer: undefined,
    };
    let jobs = this.#projects.get(projectId);
    if (!jobs) {
      jobs = new Map();
      this.#projects.set(projectId, jobs);
    }
    jobs.set(jobId, record);
    if (job.status === 'active') this.#schedule(record, Date.now());
    return structuredClone(job);
  }

  /** Whether the job exists. */
  has(projectId: string, jobId: string): boolean {
    return this.#find(projectId, jobId) !== undefined;
  }

  /** The job as a read shows it at `now`; the caller must not change it. */
  view(projectId: string, jobId: string, now: number): AgentJob | undefined {
    const record = this.#find(projectId, jobId);
    if (!record) return undefined;
    if (record.shown && now < record.shownUntil) return record.shown;
    record.shown = undefined;
    return record.job;
  }

  /** Creates a job for `prompt`: it is active at once, and its first run ends as any other. */
  create(projectId: string, prompt: string, now: number): string {
    this.#created += 1;
    const jobId = `job-${now.toString(36)}-${this.#created}`;
    this.seed(projectId, jobId, { status: 'active' });
    const record = this.#find(projectId, jobId) as JobRecord;
    record.prompt = prompt;
    return jobId;
  }

  /** Accepts a follow-up into an existing job: it turns active and its run (re)starts. */
  accept(projectId: string, jobId: string, prompt: string, now: number): void {
    const record = this.#find(projectId, jobId);
    if (!record) throw new Error('accept() on a job that does not exist');
    const staleMs = this.#settings.staleTerminalMs();
    const inStaleWindow = record.shown !== undefined && now < record.shownUntil;
    if (!inStaleWindow && staleMs > 0 && record.job.status !== 'active') {
      record.shown = record.job;
      record.shownUntil = now + staleMs;
    }
    record.prompt = prompt;
    record.job = { ...record.job, status: 'active', prLink: null, archivedAt: null };
    this.#schedule(record, Math.max(now, record.shown ? record.shownUntil : now));
  }

  /** Clears every timer; jobs stay readable. */
  close(): void {
    for (const jobs of this.#projects.values()) {
      for (const record of jobs.values()) record.timer?.close();
    }
  }

  #find(projectId: string, jobId: string): JobRecord | undefined {
    return this.#projects.get(projectId)?.get(jobId);
  }

  /** (Re)starts the run's one timer: it ends `workTime` after `activeFrom`. */
  #schedule(record: JobRecord, activeFrom: number): void {
    record.timer?.close();
    const workMs = this.#settings.workTimeMs(record.projectId, record.jobId);
    const delayMs = Math.max(0, activeFrom + workMs - Date.now());
    record.timer = setTimeout(() => this.#finish(record), delayMs);
    record.timer.unref();
  }

  #finish(record: JobRecord): void {
    record.timer = undefined;
    const outcome = this.#settings.outcome(record.projectId, record.jobId, record.prompt);
    const base = { ...record.job, prLink: null, archivedAt: null };
    if (outcome === 'completed') {
      this.#pullRequests += 1;
      const prLink = `https://github.com/acme/${encodeURIComponent(record.jobId)}/pull/${this.#pullRequests}`;
      record.job = { ...base, status: 'completed', prLink };
    } else if (outcome === 'completed_no_pr') {
      record.job = { ...base, status: 'completed' };
    } else if (outcome === 'archived') {
      record.job = { ...base, status: 'archived', archivedAt: new Date().toISOString() };
    } else {
      record.job = { ...base, status: 'failed' };
    }
  }
}

function defaultJob(projectId: string, jobId: string): AgentJob {
  return {
    id: jobId,
    status: 'completed',
    source: { repository: `https://github.com/acme/${encodeURIComponent(projectId)}`, ref: 'main' },
    model: 'claude-sonnet-4-5',
    prLink: null,
    createdAt: new Date().toISOString(),
    archivedAt: null,
  };
}
