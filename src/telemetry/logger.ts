import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths pino censors wherever they appear in a log object. The key is also kept out of every
 * object we log in the first place; this list is the second line of defence.
 */
export const REDACT_PATHS = [
  'apiKey',
  'agentApiKey',
  'key.apiKey',
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'config.agentApiKey',
  'config.intakeToken',
  'config.dashboardToken',
  'config.redisUrl',
  'token',
  'password',
] as const;

/** Creates the root logger. Tests pass a destination to read the JSON lines back. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'agent-dispatch' },
      redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
