import { NO_FAULTS, type Faults } from './options.js';
import { jsonError, type SimulatedResponse } from './http.js';

/**
 * Draws the injected faults for one request. Each rate is drawn on its own, in a fixed order, so
 * a seeded `random` gives the same faults for the same sequence of requests.
 */
export class FaultDice {
  #faults: Faults;
  readonly #random: () => number;

  constructor(faults: Partial<Faults> | undefined, random: () => number) {
    this.#faults = { ...NO_FAULTS, ...faults };
    this.#random = random;
  }

  /** The current faults; read-only for callers. */
  get current(): Readonly<Faults> {
    return this.#faults;
  }

  /** Merges `faults` into the current ones. */
  set(faults: Partial<Faults>): void {
    this.#faults = { ...this.#faults, ...faults };
  }

  /** True with probability `rate`. A rate of 0 never draws, so the default costs nothing. */
  hit(rate: number): boolean {
    return rate > 0 && this.#random() < rate;
  }

  /** The delay before answering this request, in ms. */
  latencyMs(): number {
    const latency = this.#faults.latencyMs;
    if (typeof latency === 'number') return latency;
    const [min, max] = latency;
    return min + Math.floor(this.#random() * (max - min + 1));
  }

  /** An answer that replaces processing (a gateway error or an HTML error page), or undefined. */
  gatewayFault(): { readonly reply: SimulatedResponse; readonly fault: string } | undefined {
    if (this.hit(this.#faults.htmlErrorRate)) return { reply: HTML_502, fault: 'html' };
    if (this.hit(this.#faults.serverErrorRate)) {
      const statuses = [500, 502, 503] as const;
      const status = statuses[Math.floor(this.#random() * statuses.length)] ?? 500;
      return { reply: jsonError(status, 'simulated server error'), fault: '5xx' };
    }
    return undefined;
  }
}

const HTML_502: SimulatedResponse = {
  status: 502,
  contentType: 'text/html; charset=utf-8',
  body:
    '<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n' +
    '<body><h1>502 Bad Gateway</h1><p>The upstream server did not answer.</p></body></html>\n',
};

/** A 200 body cut in half: what a proxy that drops a connection mid-body might leave. */
export function malformed(value: unknown): string {
  const text = JSON.stringify(value);
  return text.slice(0, Math.max(1, Math.floor(text.length / 2)));
}
