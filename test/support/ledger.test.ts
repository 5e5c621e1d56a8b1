import { describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/simulator/index.js';
import { tally, type Accepted } from '../faults/support/ledger.js';
import type { StreamEvent } from './events.js';

/**
 * The drills' books (test/faults/support/ledger.ts) decide whether a drill passes, so what they
 * flag is tested on its own: here, the endings that contradict what the API received.
 */

function accepted(n: number): Accepted {
  return {
    dispatchId: `d${n}`,
    input: { projectId: 'p', jobId: `j${n}`, prompt: `drill #${n}`, key: `k${n}` },
  };
}

function event(n: number, type: string, reason?: string): StreamEvent {
  return {
    id: `${n}-0`,
    type,
    dispatchId: `d${n}`,
    projectId: 'p',
    jobId: `j${n}`,
    status: '',
    prLink: '',
    traceparent: undefined,
    v: '1',
    event: reason === undefined ? {} : { reason },
  };
}

function delivered(n: number): Delivery {
  return { at: n, projectId: 'p', jobId: `j${n}`, prompt: `drill #${n}` };
}

describe('the books of a drill', () => {
  it('flag a send failure only for a prompt the API received', () => {
    const books = tally(
      [1, 2, 3].map(accepted),
      [
        event(1, 'followup.undeliverable', 'send_failed:server'),
        event(2, 'followup.undeliverable', 'send_failed:server'),
        event(3, 'followup.undeliverable', 'ambiguous'),
      ],
      [delivered(2), delivered(3)],
    );
    // d3, in doubt, makes no claim that its prompt did not arrive.
    expect(books.failedButDelivered).toEqual(['d2']);
    expect(books.endings).toEqual({
      'followup.undeliverable:send_failed:server': 2,
      'followup.undeliverable:ambiguous': 1,
    });
  });

  it("flag an outcome the simulator did not give the prompt's run, and one never delivered", () => {
    const books = tally(
      [1, 2, 3].map(accepted),
      [event(1, 'followup.completed'), event(2, 'followup.failed'), event(3, 'followup.completed')],
      [delivered(1), delivered(2)],
      () => 'followup.completed',
    );
    expect(books.wrongOutcomes).toEqual(['d2']);
    expect(books.outcomesWithoutDelivery).toEqual(['d3']);
    expect(books.failedButDelivered).toEqual([]);
    expect(books.lost).toEqual([]);
  });
});
