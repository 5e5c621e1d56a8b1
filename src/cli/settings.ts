import { loadConfig, type Config, type SettingName } from '../config/index.js';
import type { Command, CommandContext } from './command.js';

/**
 * Loads the config of a command: the environment, overridden by the command's flags that name a
 * setting, with the command's required settings enforced. Throws `ConfigError` (exit 2).
 */
export function configOf(command: Command, ctx: CommandContext): Config {
  const overrides: Partial<Record<SettingName, string>> = {};
  for (const [name, option] of Object.entries(command.options)) {
    const value = ctx.values[name];
    if (option.setting && typeof value === 'string') overrides[option.setting] = value;
  }
  return loadConfig(ctx.env, overrides, { required: command.requires ?? [] });
}
