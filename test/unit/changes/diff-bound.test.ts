import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { diff } from '../../../src/changes/index.js';

// A diff runs on the daemon's thread: a file a job rewrote line by line must not hold it for minutes.
const root = mkdtempSync(join(tmpdir(), 'procctl-diff-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A workspace and an upper directory, each holding `name` with its own text. */
function sides(name: string, before: string, after: string): { ws: string; upper: string } {
  const ws = mkdtempSync(join(root, 'ws-'));
  const upper = mkdtempSync(join(root, 'upper-'));
  mkdirSync(ws, { recursive: true });
  writeFileSync(join(ws, name), before);
  writeFileSync(join(upper, name), after);
  return { ws, upper };
}

describe('the diff of a changed file', () => {
  it('of a file every line of which changed is named, not computed', () => {
    const lines = Array.from({ length: 20_000 }, (_, i) => `line ${i} of the lock file`);
    const { ws, upper } = sides('lock.json', `${lines.join('\n')}\n`, `${lines.map((l) => `x${l}`).join('\n')}\n`);
    const page = diff([{ path: 'lock.json', kind: 'modified', type: 'file', oldType: 'file', size: 1, oldSize: 1 }], upper, ws);
    expect(page.text).toContain('Files differ too much to show a diff here');
  });

  it('of an ordinary edit is shown', () => {
    const { ws, upper } = sides('a.txt', 'one\ntwo\n', 'one\nthree\n');
    const page = diff([{ path: 'a.txt', kind: 'modified', type: 'file', oldType: 'file', size: 10, oldSize: 8 }], upper, ws);
    expect(page.text).toContain('-two');
    expect(page.text).toContain('+three');
  });
});
