import { AgentDispatchError } from '../agent-dispatch-error.js';

/** The one error a bad configuration raises: every problem at once, each naming its setting. */

/** One problem with one setting. `message` never contains a secret setting's value. */
export interface SettingProblem {
  readonly setting: string;
  readonly message: string;
}

/** Thrown by {@link loadConfig}; lists every bad setting at once. Code `bad_setting`. */
export class ConfigError extends AgentDispatchError {
  readonly code = 'bad_setting';
  constructor(readonly problems: readonly SettingProblem[]) {
    super(problems.map((p) => `${p.setting}: ${p.message}`).join('\n'));
    this.name = 'ConfigError';
  }
}
