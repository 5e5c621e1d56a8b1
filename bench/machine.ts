import { readFileSync } from 'node:fs';
import { availableParallelism, release, totalmem, type as osType } from 'node:os';
import { bytes } from './stats.js';

/** The machine a run measured, as the report's header shows it. */
export interface Machine {
  readonly cpuModel: string;
  readonly cores: number;
  readonly memory: string;
  readonly os: string;
  readonly node: string;
}

/** Reads the machine's description; the CPU model comes from /proc/cpuinfo. */
export function describeMachine(): Machine {
  let cpuModel = 'unknown CPU';
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    cpuModel = /^model name\s*:\s*(.+)$/m.exec(info)?.[1]?.trim() ?? cpuModel;
  } catch {
    // Not Linux: the model stays unknown; nothing else depends on it.
  }
  return {
    cpuModel,
    cores: availableParallelism(),
    memory: bytes(totalmem()),
    os: `${osType()} ${release()}`,
    node: process.version,
  };
}
