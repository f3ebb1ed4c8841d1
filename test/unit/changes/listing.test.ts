import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { plan, read } from '../../../src/changes/index.js';
import { Listing } from '../../../src/changes/listing.js';

/**
 * Directories with many changed names are looked up through one listing of the workspace's
 * directory (listing.ts): what read and plan say must be what name-by-name lookups say, for
 * names present, absent, not UTF-8, and names that appear after the session wrote its own.
 */
describe('changes of a directory with many names', () => {
  let base: string | undefined;
  afterEach(() => {
    if (base) rmSync(base, { recursive: true, force: true });
    base = undefined;
  });

  function setUp() {
    base = mkdtempSync(join(tmpdir(), 'procctl-listing-'));
    const upper = join(base, 'upper');
    const ws = join(base, 'ws');
    mkdirSync(join(upper, 'many'), { recursive: true });
    mkdirSync(join(ws, 'many'), { recursive: true });
    // The workspace first (a workspace file newer than the session's copy of it is a conflict): one
    // the session rewrote, one it rewrote with the same bytes, one it never touched.
    writeFileSync(join(ws, 'many', 'f3'), 'old\n');
    writeFileSync(join(ws, 'many', 'f4'), 'new 4\n');
    writeFileSync(join(ws, 'many', 'untouched'), 'x\n');
    // A name that is not UTF-8, in both.
    writeFileSync(Buffer.concat([Buffer.from(join(ws, 'many') + '/'), Buffer.from([0x66, 0xff])]), 'old odd\n');
    // Then what the session wrote.
    for (let i = 0; i < 40; i++) writeFileSync(join(upper, 'many', `f${i}`), `new ${i}\n`);
    writeFileSync(Buffer.concat([Buffer.from(join(upper, 'many') + '/'), Buffer.from([0x66, 0xff])]), 'new odd\n');
    return { upper, ws };
  }

  it('read names added, modified and unchanged files as lookups one by one would', () => {
    const { upper, ws } = setUp();
    const set = read(upper, ws);
    const kinds = Object.fromEntries(set.files.map((f) => [f.path, f.kind]));
    expect(kinds['many/f3']).toBe('modified');
    expect(kinds['many/f0']).toBe('added');
    expect(kinds['many/f39']).toBe('added');
    expect(kinds['many/f\udcff']).toBe('modified');
    expect(kinds['many/f4']).toBeUndefined();
    expect(kinds['many/untouched']).toBeUndefined();
    expect(set.totals).toMatchObject({ files: 40, added: 38, modified: 2 });
  });

  it('plan sees a file that appeared in the workspace after the session wrote its own, among many', () => {
    const { upper, ws } = setUp();
    const set = read(upper, ws);
    writeFileSync(join(ws, 'many', 'f7'), 'the editor wrote this\n');
    const rows = Object.fromEntries(plan(set, ws, { sessionStartMs: Date.now() }).map((r) => [r.path, r]));
    expect(rows['many/f7']).toMatchObject({ action: 'conflict' });
    expect(rows['many/f7'].why).toMatch(/the workspace now has a file there/);
    expect(rows['many/f8']).toMatchObject({ action: 'write' });
    expect(rows['many/f\udcff']).toMatchObject({ action: 'write' });
  });

  it('a listing is read only where it saves lookups', () => {
    const { ws } = setUp();
    const dir = join(ws, 'many');
    expect(Listing.of(dir, 4, 4096)).toBeUndefined();
    expect(Listing.of(dir, 40, 4096)?.has(Buffer.from('f3'))).toBe(true);
    expect(Listing.of(dir, 40, 4096)?.has(Buffer.from('f0'))).toBe(false);
    // A directory far larger than what is asked about is looked up name by name.
    expect(Listing.of(dir, 20, 64 * 1024 * 1024)).toBeUndefined();
  });
});
