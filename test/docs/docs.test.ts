import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { REFERENCE_PAGES } from '../../scripts/reference.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Every Markdown page a user reads: the README, the CHANGELOG and everything under docs/. */
function pages(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return walk(path);
      return path.endsWith('.md') ? [path] : [];
    });
  return [join(ROOT, 'README.md'), join(ROOT, 'CHANGELOG.md'), ...walk(join(ROOT, 'docs'))];
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchors(text: string): Set<string> {
  const withoutCode = text.replace(/```[\s\S]*?```/g, '');
  return new Set([...withoutCode.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1] ?? '')));
}

describe('the docs', () => {
  it('keep the README within 15 KB', () => {
    expect(statSync(join(ROOT, 'README.md')).size).toBeLessThanOrEqual(15 * 1024);
  });

  it.each(Object.entries(REFERENCE_PAGES))(
    '%s is what the code renders (npm run docs)',
    (path, render) => {
      expect(readFileSync(join(ROOT, path), 'utf8')).toBe(render());
    },
  );

  it('link only to files and headings that exist', () => {
    const broken: string[] = [];
    for (const page of pages()) {
      const text = readFileSync(page, 'utf8').replace(/```[\s\S]*?```/g, '');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (!target || /^[a-z]+:/i.test(target)) continue;
        const [file = '', anchor] = target.split('#');
        const resolved = file === '' ? page : join(dirname(page), file);
        const where = `${relative(ROOT, page)} → ${target}`;
        if (!existsSync(resolved)) broken.push(`${where} (no such file)`);
        else if (
          anchor &&
          resolved.endsWith('.md') &&
          !anchors(readFileSync(resolved, 'utf8')).has(anchor)
        )
          broken.push(`${where} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });
});
