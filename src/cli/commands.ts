import type { Command } from './command.js';
import { cancelCommand, projectCommand } from './controls.js';
import { createCommand } from './create.js';
import { enqueueCommand } from './enqueue.js';
import { eventsCommand } from './events.js';
import { redriveCommand } from './redrive.js';
import { pollerCommand, workerCommand } from './roles.js';
import { serveCommand } from './serve.js';
import { simulateCommand } from './simulate.js';
import { startCommand } from './start.js';
import { statusCommand } from './status.js';
import { webhookCommand } from './webhook.js';

/** Every `agent-dispatch` command, in the order of `--help` and docs/reference/cli.md. */
export const COMMANDS: readonly Command[] = [
  startCommand,
  workerCommand,
  pollerCommand,
  serveCommand,
  enqueueCommand,
  createCommand,
  statusCommand,
  cancelCommand,
  redriveCommand,
  projectCommand,
  eventsCommand,
  simulateCommand,
  webhookCommand,
];
