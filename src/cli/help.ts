import { SETTINGS } from '../config/index.js';
import type { Command } from './command.js';

/** `agent-dispatch --help`: the commands, and the settings every command reads. */
export function topLevelHelp(commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  const settingWidth = Math.max(...Object.keys(SETTINGS).map((s) => s.length));
  return [
    "agent-dispatch: delivers follow-up prompts to AI agent jobs within each project's rate limit,",
    'tracks each job to its end and publishes one completion event per follow-up.',
    '',
    'Usage: agent-dispatch <command> [options]',
    '',
    'Commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Settings (environment variables; some commands take flags that override them):',
    ...Object.entries(SETTINGS).map(([name, s]) => {
      const fallback = 'default' in s ? ` (default ${s.default})` : '';
      return `  ${name.padEnd(settingWidth)}  ${s.description.replaceAll('`', '')}${fallback}`;
    }),
    '',
    "Run `agent-dispatch <command> --help` for a command's options.",
    'Exit codes: 0 done, 1 the work failed, 2 bad usage or a bad setting.',
  ].join('\n');
}

/** `agent-dispatch <command> --help`. */
export function commandHelp(command: Command): string {
  const entries = Object.entries(command.options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : ''}--${name}${o.type === 'string' ? ` ${o.placeholder ?? 'VALUE'}` : ''}`;
    const overrides = o.setting ? ` (overrides ${o.setting})` : '';
    return [flag, `${o.description}${overrides}`] as const;
  });
  entries.push(['-h, --help', 'show this help']);
  const width = Math.max(...entries.map(([flag]) => flag.length));
  return [
    `agent-dispatch ${command.name}: ${command.summary}`,
    '',
    `Usage: agent-dispatch ${command.usage}`,
    '',
    'Options:',
    ...entries.map(([flag, text]) => `  ${flag.padEnd(width)}  ${text}`),
    ...(command.requires?.length
      ? [
          '',
          `Requires: ${command.requires
            .map((name) =>
              name === 'AGENT_API_KEY'
                ? 'AGENT_API_KEY (or AGENT_API_KEY_FILE)'
                : name === 'REDIS_URL'
                  ? 'REDIS_URL (or REDIS_SENTINELS and REDIS_SENTINEL_NAME)'
                  : name,
            )
            .join(', ')}.`,
        ]
      : []),
    ...(command.details ? ['', command.details] : []),
  ].join('\n');
}
