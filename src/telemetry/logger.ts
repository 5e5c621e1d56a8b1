import { pino, type Logger, type DestinationStream } from 'pino';
import { PinoPretty } from 'pino-pretty';
import type { LogFormat } from '../config/index.js';

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
  'config.tokens',
  'config.metricsTokens',
  'config.redisUrl',
  'token',
  'password',
] as const;

/**
 * The format a command logs in: `LOG_FORMAT` when set; otherwise pretty only where a person is
 * certainly reading (`preferPretty`: `start` on a terminal), JSON for everything else.
 */
export function logFormatFor(configured: LogFormat | undefined, preferPretty: boolean): LogFormat {
  return configured ?? (preferPretty && process.stdout.isTTY === true ? 'pretty' : 'json');
}

/**
 * Creates the root logger, writing to standard output. Tests pass a destination to read the JSON
 * lines back. `pretty` formats in this process (no worker thread), colored on a terminal; the
 * redaction applies before formatting, so a pretty line hides what a JSON line hides.
 */
export function createLogger(
  level: string,
  destination?: DestinationStream,
  format: LogFormat = 'json',
): Logger {
  const out =
    format === 'pretty'
      ? PinoPretty({
          destination: destination ?? 1,
          colorize: destination === undefined && process.stdout.isTTY === true,
          ignore: 'pid,hostname,service',
          translateTime: 'SYS:HH:MM:ss.l',
          singleLine: true,
        })
      : (destination ?? pino.destination({ dest: 1, sync: false }));
  return pino(
    {
      level,
      base: { service: 'agent-dispatch' },
      redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    out,
  );
}
