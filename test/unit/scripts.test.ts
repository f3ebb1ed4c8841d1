import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;

describe('package.json scripts', () => {
  // A bare tsc rewrites dist/src/cli/main.js, which leaves the CLI's one-file bundle stale: the
  // bench and the soak would then time procctl on its slow path (the compiled sources).
  it('a script that runs what is compiled in dist/ builds it with npm run build, the one definition of a build', () => {
    const running = Object.entries(scripts).filter(([, cmd]) => /\bnode dist\//.test(cmd));
    expect(running.map(([name]) => name)).toEqual(expect.arrayContaining(['bench', 'soak']));
    for (const [name, cmd] of running) expect(cmd, name).toMatch(/^npm run build && /);
  });
});
