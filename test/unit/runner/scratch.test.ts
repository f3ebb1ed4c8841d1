import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ScratchDirs } from '../../../src/runner/scratch.js';

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

/** File-system requests handed to libuv's threads and not yet answered. */
const fsRequests = () => process.getActiveResourcesInfo().filter((r) => r.startsWith('FSReq')).length;

async function until(what: string, ok: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('ScratchDirs', () => {
  it('hands out a directory made ahead, and makes the next one only once the turn that took it is over', async () => {
    const root = mkdtempSync(join(tmpdir(), 'procctl-scratch-'));
    roots.push(root);
    const scratch = new ScratchDirs(join(root, 'sessions'));
    scratch.refill();
    const listed = () => readdirSync(join(root, 'sessions')).length;
    await until('the spare directories', () => fsRequests() === 0 && listed() === 4);
    const dir = scratch.take();
    expect(readdirSync(join(root, 'sessions'))).toContain(dir.slice(dir.lastIndexOf('/') + 1));
    // Nothing is handed to a thread on the way to the spawn (waking one costs the exec's answer).
    expect(fsRequests()).toBe(0);
    await new Promise((r) => setImmediate(r));
    await until('the spare made again', () => fsRequests() === 0 && listed() === 5);
    // Several taken in one turn: one refill after it.
    const more = [scratch.take(), scratch.take(), scratch.take()];
    expect(new Set(more).size).toBe(3);
    expect(fsRequests()).toBe(0);
    await until('the spares made again', () => fsRequests() === 0 && listed() === 8);
  });

  it('gives each spare the file named ahead while one is named, and leaves nothing of it at the release', async () => {
    const root = mkdtempSync(join(tmpdir(), 'procctl-scratch-'));
    roots.push(root);
    let named: string | undefined = '.status';
    const scratch = new ScratchDirs(join(root, 'sessions'), () => named);
    scratch.refill();
    const listed = () => readdirSync(join(root, 'sessions')).length;
    await until('the spare directories', () => fsRequests() === 0 && listed() === 4);
    const dir = scratch.take();
    expect(readdirSync(dir)).toEqual(['.status']);
    expect(statSync(join(dir, '.status')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, '.status')).size).toBe(0);
    scratch.release(dir);
    expect(existsSync(dir)).toBe(false);
    // A job may make the file something else (its scratch directory is its own): released all the same.
    const other = scratch.take();
    rmSync(join(other, '.status'));
    mkdirSync(join(other, '.status', 'deep'), { recursive: true });
    scratch.release(other);
    expect(existsSync(other)).toBe(false);
    // Named no more (the sandbox turned off by a reload): the spares made from then on are empty.
    named = undefined;
    await until('the spare made again', () => fsRequests() === 0 && listed() === 4);
    const all = readdirSync(join(root, 'sessions')).map((d) => join(root, 'sessions', d));
    const empty = all.filter((d) => readdirSync(d).length === 0);
    // The two taken above were made again once the turn was over, when no file was named any more.
    expect(empty.length).toBe(2);
    expect(all.length - empty.length).toBe(2);
  });
});
