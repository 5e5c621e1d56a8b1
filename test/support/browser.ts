import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

/**
 * Headless Chromium for the dashboard's browser tests, shared by them: the system's `chromium`,
 * never a downloaded one. Missing, it fails naming the package, never skips.
 */

/**
 * The Chromium to drive: `CHROMIUM_PATH`, else `chromium` or `chromium-browser` on PATH. Missing,
 * it fails the suite naming the package, never skips it.
 */
export function chromiumExecutable(): string {
  const explicit = process.env['CHROMIUM_PATH'];
  const candidates = explicit
    ? [explicit]
    : (process.env['PATH'] ?? '')
        .split(':')
        .flatMap((dir) => ['chromium', 'chromium-browser'].map((name) => join(dir, name)));
  const found = candidates.find((path) => existsSync(path));
  if (found) return found;
  throw new Error(
    `chromium is not installed${explicit ? ` at CHROMIUM_PATH=${explicit}` : ''}: the dashboard's browser tests need it. ` +
      'Install it with "apt-get install -y chromium" (or point CHROMIUM_PATH at a Chromium).',
  );
}

/** Launches headless Chromium with nothing that reaches out to the network by itself. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumExecutable(),
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
