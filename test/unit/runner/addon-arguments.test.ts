import { cpSync, closeSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadAddon } from '../../../src/base/addon.js';
import { ROOT } from '../../helpers/daemon.js';

/**
 * What the addon's functions share (native/napi-util.h): their arguments read as int32s or
 * strings, a TypeError that says how the call is made for anything else, and the objects they
 * answer with. And the stale-build check (native/source-hash.cjs) counts the headers the sources
 * include, so a change to a shared header alone is not run as if current.
 */
type Fn = (...args: unknown[]) => any;
const NAMES = ['pidfdOpen', 'pidfdExit', 'peerCredentials', 'getxattr', 'setxattr', 'setWindowSize', 'parkWaiters', 'keepPair', 'keepSend', 'keepAccept', 'keepListen', 'dupDescriptor', 'shutdownRead', 'mountsChanged', 'sendDescriptor'] as const;
const addon = loadAddon<Record<(typeof NAMES)[number], Fn>>(NAMES);
if (addon instanceof Error) throw addon;
const opened: number[] = [];
const scratch = mkdtempSync(join(tmpdir(), 'procctl-addon-args-'));

afterAll(() => {
  for (const fd of opened) closeSync(fd);
  rmSync(scratch, { recursive: true, force: true });
});

describe('the addon\'s arguments and answers', () => {
  it('refuses what is not an int32 with a TypeError naming the call', () => {
    const refused: [Fn, unknown[], RegExp][] = [
      [addon.pidfdOpen, [], /^pidfdOpen\(pid\): a positive pid$/],
      [addon.pidfdOpen, [0], /^pidfdOpen\(pid\)/],
      [addon.pidfdExit, ['3'], /^pidfdExit\(fd\)$/],
      [addon.peerCredentials, [{}], /^peerCredentials\(fd\): fd must be a number$/],
      [addon.setWindowSize, [0, 80], /^setWindowSize\(fd, cols, rows\): cols and rows are 1\.\.65535$/],
      [addon.setWindowSize, [0, 80, 70000], /^setWindowSize/],
      [addon.keepAccept, [3, 'soon'], /^keepAccept\(fd, timeoutMs\)$/],
      [addon.dupDescriptor, [-1], /^dupDescriptor\(fd\)$/],
      [addon.shutdownRead, [null], /^shutdownRead\(fd\)$/],
      [addon.mountsChanged, [-1], /^mountsChanged\(fd\)$/],
      [addon.sendDescriptor, [3], /^sendDescriptor\(socket, fd\): both must be numbers$/],
      [addon.parkWaiters, [5], /^parkWaiters\(pids\)$/],
    ];
    for (const [fn, args, message] of refused) expect(() => fn(...args), `${fn.name}(${args.map((a) => JSON.stringify(a)).join(', ')})`).toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(message) }));
  });

  it('refuses a string that is not one, or holds a NUL byte where a path or a name goes', () => {
    const [a, b] = addon.keepPair() as number[];
    opened.push(a, b);
    expect(() => addon.keepSend(a, 42, [])).toThrow(/^keepSend: text must be a string of at most 64 KiB$/);
    expect(() => addon.keepSend(a, 'x'.repeat(65537), [])).toThrow(/at most 64 KiB/);
    expect(() => addon.keepListen(7)).toThrow(/^keepListen\(path\): a path shorter than 107 bytes$/);
    const file = join(scratch, 'file');
    writeFileSync(file, '');
    expect(() => addon.getxattr(`${file}\0x`, 'user.a')).toThrow(/^getxattr\(path, name\): a string or Buffer without NUL bytes each$/);
    expect(() => addon.getxattr(file, 5)).toThrow(/^getxattr\(path, name\)/);
    expect(() => addon.setxattr(file, 'user.a', 'not a buffer')).toThrow(/^setxattr\(path, name, value\): value is a Buffer$/);
  });

  it('answers with the objects of named values it says', () => {
    const [a, b] = addon.keepPair() as number[];
    opened.push(a, b);
    expect(addon.peerCredentials(a)).toEqual({ pid: process.pid, uid: process.getuid!(), gid: process.getgid!() });
    expect(addon.keepSend(a, 'one', [])).toBe(true);
    const fd = addon.pidfdOpen(process.pid) as number;
    opened.push(fd);
    // Running (Linux 6.13 and later say so), or a kernel that cannot tell: a sentence either way.
    expect(addon.pidfdExit(fd)).toEqual({ why: expect.any(String), running: expect.any(Boolean) });
    const file = join(scratch, 'bare');
    writeFileSync(file, '');
    expect(addon.getxattr(file, 'user.procctl-none')).toBeNull();
  });
});

describe('the stale-build check', () => {
  it('counts every header the sources include: a change to one alone makes the build stale', () => {
    const { sourceHash } = createRequire(import.meta.url)(join(ROOT, 'native', 'source-hash.cjs')) as { sourceHash(dir?: string): string };
    const native = join(ROOT, 'native');
    const included = new Set(readdirSync(native).filter((f) => f.endsWith('.c')).flatMap((f) => [...readFileSync(join(native, f), 'utf8').matchAll(/^#include "([^"]+)"/gm)].map((m) => m[1])));
    expect([...included]).toContain('napi-util.h');
    const copy = join(scratch, 'native');
    cpSync(native, copy, { recursive: true });
    const before = sourceHash(copy);
    expect(before).toBe(sourceHash(native));
    for (const header of included) {
      const file = join(copy, header);
      const text = readFileSync(file, 'utf8');
      writeFileSync(file, `${text}\n`);
      expect(sourceHash(copy), header).not.toBe(before);
      writeFileSync(file, text);
    }
  });
});
