import { closeSync, constants, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { linkAt, renameAt, statAt, writeBeside } from '../../../src/changes/at.js';
import { fingerprint } from '../../../src/changes/keep.js';

let base: string;
let from: number;
let to: number;
beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'procctl-at-'));
  mkdirSync(join(base, 'upper'));
  mkdirSync(join(base, 'ws'));
  from = openSync(join(base, 'upper'), constants.O_RDONLY | constants.O_DIRECTORY);
  to = openSync(join(base, 'ws'), constants.O_RDONLY | constants.O_DIRECTORY);
});
afterEach(() => {
  closeSync(from);
  closeSync(to);
  rmSync(base, { recursive: true, force: true });
});

describe("apply's calls from a directory's descriptor (native/copyat.c)", () => {
  it('writes a file beside its target with its bytes, the mode asked, its times to the nanosecond, and says what it wrote as lstat does', () => {
    const body = Buffer.alloc(300_000, 'q'); // more than the fallback's one read
    writeFileSync(join(base, 'upper', 'f'), body);
    utimesSync(join(base, 'upper', 'f'), new Date('2020-01-02T03:04:05.123Z'), new Date('2021-02-03T04:05:06.789Z'));
    const src = lstatSync(join(base, 'upper', 'f'), { bigint: true }); // as it was: the copy's read moves its atime
    const wrote = writeBeside(from, 'f', to, '.tmp', 0o751, undefined, true);
    const made = join(base, 'ws', '.tmp');
    const st = lstatSync(made, { bigint: true }); // before the read below moves its atime
    expect(readFileSync(made).equals(body)).toBe(true);
    expect(Number(st.mode) & 0o7777).toBe(0o751);
    expect(st.mtimeNs).toBe(src.mtimeNs);
    expect(st.atimeNs).toBe(src.atimeNs);
    expect(wrote).toEqual(fingerprint(st));
  });

  it('takes a name that is not UTF-8 as its bytes', () => {
    const name = Buffer.from([0x62, 0xff]);
    writeFileSync(Buffer.concat([Buffer.from(`${base}/upper/`), name]), 'b');
    expect(writeBeside(from, name, to, name, 0o644, undefined, false)?.size).toBe(1);
    expect(readdirSync(join(base, 'ws'), { encoding: 'buffer' })).toEqual([name]);
  });

  it('makes nothing for an upper entry that is not a regular file, and never follows a symlink there', () => {
    writeFileSync(join(base, 'secret'), 'outside');
    symlinkSync(join(base, 'secret'), join(base, 'upper', 'link'));
    mkdirSync(join(base, 'upper', 'dir'));
    expect(() => writeBeside(from, 'link', to, '.tmp', 0o644, undefined, false)).toThrow(expect.objectContaining({ code: 'ELOOP' }));
    expect(writeBeside(from, 'dir', to, '.tmp', 0o644, undefined, false)).toBeNull();
    expect(readdirSync(join(base, 'ws'))).toEqual([]);
  });

  it('never writes through or over what is at the new name: an error with its code, and that entry untouched', () => {
    writeFileSync(join(base, 'upper', 'f'), 'new');
    writeFileSync(join(base, 'outside'), 'keep');
    symlinkSync(join(base, 'outside'), join(base, 'ws', '.tmp'));
    writeFileSync(join(base, 'ws', '.tmp2'), 'there');
    expect(() => writeBeside(from, 'f', to, '.tmp', 0o644, undefined, false)).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    expect(() => writeBeside(from, 'f', to, '.tmp2', 0o644, undefined, false)).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    expect(readFileSync(join(base, 'outside'), 'utf8')).toBe('keep');
    expect(lstatSync(join(base, 'ws', '.tmp')).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(base, 'ws', '.tmp2'), 'utf8')).toBe('there');
  });

  it('removes the new file when a step after its making fails', (ctx) => {
    if (process.getuid?.() === 0) return ctx.skip('root may give a file to any owner: the failing fchown needs an unprivileged user');
    writeFileSync(join(base, 'upper', 'f'), 'new');
    expect(() => writeBeside(from, 'f', to, '.tmp', 0o644, { uid: 0, gid: 0 }, false)).toThrow(expect.objectContaining({ code: 'EPERM' }));
    expect(existsSync(join(base, 'ws', '.tmp'))).toBe(false);
  });

  it('stats, links and renames by name in a directory, a symlink as itself', () => {
    writeFileSync(join(base, 'ws', 'a'), 'a');
    symlinkSync('/nowhere', join(base, 'ws', 'l'));
    expect(statAt(to, 'a')).toMatchObject({ type: 'file', uid: process.getuid?.(), mode: lstatSync(join(base, 'ws', 'a')).mode & 0o7777 });
    expect(statAt(to, 'l')?.type).toBe('symlink');
    expect(statAt(to, 'missing')).toBeUndefined();
    linkAt(to, 'a', from, 'kept');
    expect(lstatSync(join(base, 'upper', 'kept')).ino).toBe(lstatSync(join(base, 'ws', 'a')).ino);
    linkAt(to, 'l', from, 'kept-link');
    expect(lstatSync(join(base, 'upper', 'kept-link')).isSymbolicLink()).toBe(true);
    renameAt(to, 'a', to, 'b');
    expect(readdirSync(join(base, 'ws')).sort()).toEqual(['b', 'l']);
    expect(() => renameAt(to, 'missing', to, 'c')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });
});
