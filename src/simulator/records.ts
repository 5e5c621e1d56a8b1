import type { Route } from './http.js';
import type { Delivery, RecordedRequest } from './options.js';

/**
 * What the simulator saw: one record per request and one delivery per accepted prompt, in arrival
 * order, so tests and benchmarks can assert on what the server really received (no duplicate
 * sends, order per job, the rate per project).
 */
export class RequestLog {
  #requests: RecordedRequest[] = [];
  #deliveries: Delivery[] = [];
  #seq = 0;
  readonly #maxRecords: number;

  constructor(maxRecords: number) {
    this.#maxRecords = Math.max(1, maxRecords);
  }

  /** Records in arrival order; at least the newest `maxRecords` are kept. */
  get requests(): readonly RecordedRequest[] {
    return this.#requests;
  }

  /** Every accepted prompt, in the order it was accepted. */
  get deliveries(): readonly Delivery[] {
    return this.#deliveries;
  }

  /** Adds the record of a request whose body was read at `at`; the caller fills in the outcome. */
  record(method: string, route: Route, at: number): RecordedRequest {
    this.#seq += 1;
    const record: RecordedRequest = {
      seq: this.#seq,
      at,
      method,
      path: route.path,
      kind: route.kind,
      authorized: false,
      status: 0,
      processed: false,
    };
    if (route.projectId !== undefined) record.projectId = route.projectId;
    if (route.jobId !== undefined) record.jobId = route.jobId;
    this.#requests.push(record);
    // Dropping the oldest half at once keeps a long benchmark's memory bounded at O(1) amortized.
    if (this.#requests.length >= 2 * this.#maxRecords) {
      this.#requests = this.#requests.slice(-this.#maxRecords);
    }
    return record;
  }

  /** Adds one accepted prompt. Deliveries are never dropped: they are the ground truth. */
  deliver(delivery: Delivery): void {
    this.#deliveries.push(delivery);
  }

  /** Forgets every record and delivery; sequence numbers keep counting. */
  clear(): void {
    this.#requests = [];
    this.#deliveries = [];
  }
}

/** GET counts per project and per job, so `countGets` is O(1) whatever the traffic. */
export class GetCounter {
  #total = 0;
  readonly #projects = new Map<string, { total: number; jobs: Map<string, number> }>();

  /** Counts one GET of a job. */
  add(projectId: string, jobId: string): void {
    this.#total += 1;
    let project = this.#projects.get(projectId);
    if (!project) {
      project = { total: 0, jobs: new Map() };
      this.#projects.set(projectId, project);
    }
    project.total += 1;
    project.jobs.set(jobId, (project.jobs.get(jobId) ?? 0) + 1);
  }

  /** GETs of one job, one project, or all. */
  count(projectId?: string, jobId?: string): number {
    if (projectId === undefined) return this.#total;
    const project = this.#projects.get(projectId);
    if (!project) return 0;
    return jobId === undefined ? project.total : (project.jobs.get(jobId) ?? 0);
  }

  /** Forgets every count. */
  clear(): void {
    this.#total = 0;
    this.#projects.clear();
  }
}
