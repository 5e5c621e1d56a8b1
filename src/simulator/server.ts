import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { AgentJob } from '../agent-api/index.js';
import { answer, type Decision, type EndpointState, type ForcedLimit } from './endpoints.js';
import { FaultDice } from './faults.js';
import { jsonError, readBody, route, writeReply } from './http.js';
import { JobStore } from './jobs.js';
import {
  SIMULATOR_DEFAULTS,
  type Delivery,
  type Faults,
  type RecordedRequest,
  type Simulator,
  type SimulatorOptions,
} from './options.js';
import { GetCounter, RequestLog } from './records.js';
import { SendWindows } from './send-window.js';
import { LIFECYCLE } from '../telemetry/names.js';

/** How long the server keeps an idle keep-alive socket, like the load balancers of real APIs. */
const IDLE_SOCKET_MS = 65_000;

/** Starts a simulator listening on `options.port` (default: a free port) and `options.host`. */
export async function startSimulator(options: SimulatorOptions): Promise<Simulator> {
  const simulator = new AgentApiSimulator(options);
  await simulator.listen(
    options.port ?? SIMULATOR_DEFAULTS.port,
    options.host ?? SIMULATOR_DEFAULTS.host,
  );
  return simulator;
}

/** The simulator: one `node:http` server, the job store, the send limits and the records. */
class AgentApiSimulator implements Simulator {
  readonly #server: Server;
  readonly #state: EndpointState;
  readonly #jobs: JobStore;
  readonly #dice: FaultDice;
  readonly #log: RequestLog;
  readonly #gets = new GetCounter();
  readonly #forcedLimits = new Map<string, ForcedLimit>();
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #logger: Logger | undefined;
  #staleTerminalMs: number;
  #url = '';
  #closing: Promise<void> | undefined;

  constructor(options: SimulatorOptions) {
    const workTime = options.workTimeMs ?? SIMULATOR_DEFAULTS.workTimeMs;
    const outcome = options.outcome ?? (() => 'completed' as const);
    const limit = options.sendLimit ?? SIMULATOR_DEFAULTS.sendLimit;
    this.#staleTerminalMs = options.staleTerminalMs ?? SIMULATOR_DEFAULTS.staleTerminalMs;
    this.#logger = options.logger;
    this.#log = new RequestLog(options.maxRecords ?? SIMULATOR_DEFAULTS.maxRecords);
    this.#dice = new FaultDice(options.faults, options.random ?? Math.random);
    this.#jobs = new JobStore({
      workTimeMs: typeof workTime === 'function' ? workTime : () => workTime,
      outcome,
      staleTerminalMs: () => this.#staleTerminalMs,
    });
    this.#state = {
      authorization: `Bearer ${options.apiKey}`,
      jobs: this.#jobs,
      windows: new SendWindows(limit.max, limit.windowMs),
      dice: this.#dice,
      autoCreateJobs: options.autoCreateJobs ?? false,
      forcedLimits: this.#forcedLimits,
      deliver: (delivery) => this.#log.deliver(delivery),
    };
    // Idle sockets outlive any client's keep-alive (undici keeps them for the hinted timeout minus
    // a margin), so the client always closes first: otherwise a send could race the server's close
    // of an idle socket and fail ambiguously without any fault having been asked for.
    this.#server = createServer({ keepAliveTimeout: IDLE_SOCKET_MS }, (req, res) => {
      void this.#onRequest(req, res);
    });
  }

  get url(): string {
    return this.#url;
  }

  get requests(): readonly RecordedRequest[] {
    return this.#log.requests;
  }

  get deliveries(): readonly Delivery[] {
    return this.#log.deliveries;
  }

  async listen(port: number, host: string): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const address = this.#server.address() as AddressInfo;
    const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    this.#url = `http://${shownHost}:${address.port}`;
  }

  seedJob(projectId: string, jobId: string, fields?: Partial<AgentJob>): AgentJob {
    return this.#jobs.seed(projectId, jobId, fields);
  }

  getJob(projectId: string, jobId: string): AgentJob | undefined {
    const job = this.#jobs.view(projectId, jobId, Date.now());
    return job && structuredClone(job);
  }

  setFaults(faults: Partial<Faults>): void {
    this.#dice.set(faults);
  }

  setApiKey(apiKey: string): void {
    this.#state.authorization = `Bearer ${apiKey}`;
  }

  setStaleTerminalMs(ms: number): void {
    this.#staleTerminalMs = ms;
  }

  rateLimitProject(
    projectId: string,
    until: number,
    opts: { retryAfter?: boolean; plainText?: boolean } = {},
  ): void {
    this.#forcedLimits.set(projectId, {
      until,
      retryAfter: opts.retryAfter,
      plainText: opts.plainText,
    });
  }

  countGets(projectId?: string, jobId?: string): number {
    return this.#gets.count(projectId, jobId);
  }

  reset(): void {
    this.#log.clear();
    this.#gets.clear();
  }

  close(): Promise<void> {
    this.#closing ??= new Promise<void>((resolve) => {
      this.#jobs.close();
      for (const timer of this.#timers) clearTimeout(timer);
      this.#timers.clear();
      this.#server.close(() => resolve());
      // Hung requests (the timeout fault) and idle keep-alive sockets would hold close() open.
      this.#server.closeAllConnections();
    });
    return this.#closing;
  }

  async #onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: Buffer | undefined;
    try {
      body = await readBody(req);
    } catch {
      return; // The client went away mid-body: nothing to answer.
    }
    const target = route(req.method ?? 'GET', req.url ?? '/');
    const record = this.#log.record(req.method ?? '', target, Date.now());
    if (target.kind === 'get' && target.projectId !== undefined && target.jobId !== undefined) {
      this.#gets.add(target.projectId, target.jobId);
    }
    const latencyMs =
      this.#dice.latencyMs() + (target.kind === 'send' ? this.#dice.current.sendLatencyMs : 0);
    if (latencyMs > 0) await this.#sleep(latencyMs);
    if (this.#closing || res.destroyed) return;
    const decision: Decision =
      body === undefined
        ? { kind: 'reply', reply: jsonError(413, 'request body too large') }
        : answer(this.#state, target, req.headers.authorization, body, record, Date.now());
    this.#respond(req, res, decision, record);
    this.#logger?.debug(
      {
        seq: record.seq,
        method: record.method,
        path: record.path,
        kind: record.kind,
        status: record.status,
        processed: record.processed,
        fault: record.fault,
      },
      LIFECYCLE.simulatorRequest,
    );
  }

  #respond(
    req: IncomingMessage,
    res: ServerResponse,
    decision: Decision,
    record: RecordedRequest,
  ): void {
    if (decision.kind === 'hang') return; // Left open until the client gives up or close() runs.
    if (decision.kind === 'reset') {
      req.socket.resetAndDestroy();
      return;
    }
    record.status = decision.reply.status;
    const slowMs = decision.reply.status === 200 ? this.#dice.current.slowBodyMs : 0;
    if (slowMs > 0) record.fault ??= 'slow-body';
    writeReply(res, decision.reply, slowMs, this.#timers);
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        resolve();
      }, ms);
      timer.unref();
      this.#timers.add(timer);
    });
  }
}
