import type { TestProject } from 'vitest/node';
import { startPrivateRedis, waitForRedis } from './redis-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    redisSource: string;
  }
}

/**
 * Finds a real Redis for the whole run, in this order: a testcontainers container when a Docker
 * engine answers, a private `redis-server` on a free port, the `REDIS_URL` of the environment.
 * Fails the run, loudly, when there is none: a test that needs Redis never skips silently.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const attempts: string[] = [];

  try {
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await new GenericContainer('redis:7-alpine')
      .withCommand(['redis-server', '--appendonly', 'yes', '--maxmemory-policy', 'noeviction'])
      .withExposedPorts(6379)
      .withWaitStrategy(Wait.forLogMessage('Ready to accept connections'))
      .start();
    const url = `redis://${container.getHost()}:${container.getMappedPort(6379)}`;
    provide(project, url, 'testcontainers');
    return async () => void (await container.stop());
  } catch (err) {
    attempts.push(`testcontainers: ${firstLine(err)}`);
  }

  try {
    const server = await startPrivateRedis();
    provide(project, server.url, 'private redis-server');
    return () => server.destroy();
  } catch (err) {
    attempts.push(`redis-server: ${firstLine(err)}`);
  }

  const url = process.env['REDIS_URL'];
  if (url) {
    try {
      await waitForRedis(url, 5_000);
      provide(project, url, 'REDIS_URL');
      return async () => {};
    } catch (err) {
      attempts.push(`REDIS_URL: ${firstLine(err)}`);
    }
  } else {
    attempts.push('REDIS_URL: not set');
  }
  throw new Error(
    `No Redis for the tests. Tried:\n  ${attempts.join('\n  ')}\nInstall redis-server (apt-get install redis-server) or set REDIS_URL.`,
  );
}

function provide(project: TestProject, url: string, source: string): void {
  project.provide('redisUrl', url);
  project.provide('redisSource', source);
  console.log(`tests use Redis from ${source}`);
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';
}
