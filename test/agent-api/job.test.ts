import { describe, expect, it } from 'vitest';
import {
  JOB_STATUSES,
  TERMINAL_STATUSES,
  agentJobSchema,
  isTerminalStatus,
  statusKind,
} from '../../src/agent-api/index.js';

/** The agent-job schema tolerates what the contract says to tolerate, and nothing breaks on it. */

describe('statusKind and isTerminalStatus', () => {
  it('sorts every documented status', () => {
    expect(JOB_STATUSES.map(statusKind)).toEqual(['active', 'terminal', 'terminal', 'terminal']);
    expect(TERMINAL_STATUSES.every(isTerminalStatus)).toBe(true);
    expect(isTerminalStatus('active')).toBe(false);
  });

  it.each([undefined, '', 'queued_v3', 'COMPLETED', 'constructor', '__proto__'])(
    'calls %j unknown and not terminal',
    (status) => {
      expect(statusKind(status)).toBe('unknown');
      expect(isTerminalStatus(status)).toBe(false);
    },
  );
});

describe('agentJobSchema', () => {
  it('accepts an empty object: the document marks no field required', () => {
    expect(agentJobSchema.parse({})).toEqual({});
  });

  it('keeps only the contract fields, also inside source, and accepts any status string', () => {
    const job = {
      id: 'j',
      status: 'paused_v9',
      source: { repository: 'https://github.com/a/b', ref: null },
      model: 'm',
      prLink: null,
      createdAt: '2025-01-01T00:00:00Z',
      archivedAt: null,
    };
    const body = {
      ...job,
      source: { ...job.source, commit: 'abc', token: 'x' },
      cost: { usd: 1.5 },
      headers: { authorization: 'Bearer k' },
    };
    expect(agentJobSchema.parse(body)).toEqual(job);
  });

  it.each([
    ['a number id', { id: 1 }],
    ['a null status', { status: null }],
    ['a string source', { source: 'github' }],
    ['a numeric prLink', { prLink: 5 }],
    ['an array', []],
    ['null', null],
  ])('rejects %s', (_what, body) => {
    expect(agentJobSchema.safeParse(body).success).toBe(false);
  });
});
