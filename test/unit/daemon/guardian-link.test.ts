import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { GuardianLink } from '../../../src/daemon/guardian-link.js';
import { SLOT_BYTES, slotLine } from '../../../src/daemon/guardian-slots.js';

/**
 * The guardian's table through a planned restart (SPEC §19): the new image takes the table the old
 * one wrote. The guardian may read it at any moment and lets go of the descriptors it holds for a
 * session it does not find there, so a session handed over must never be missing from it, even
 * for an instant, and keeps its slot (with its leader's start time) as the old image wrote it.
 */

const dirs: string[] = [];
const fds: number[] = [];
afterEach(() => {
  for (const fd of fds.splice(0)) closeSync(fd);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function table(lines: string[]): { fd: number; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-guardian-link-'));
  dirs.push(dir);
  const file = join(dir, 'table');
  const fd = openSync(file, 'w+', 0o600);
  fds.push(fd);
  writeSync(fd, lines.join(''), 0, 'latin1');
  return { fd, file };
}

const silent = pino({ level: 'silent' });

describe("the guardian's table carried by a planned restart", () => {
  it('each session adopted keeps its slot as the old image wrote it, in whatever order it is adopted; the slots of those not taken back are freed and the free tail cut', () => {
    const a = slotLine({ id: 'aaaa1111', pgid: 101, startTime: 5000 });
    const b = slotLine({ id: 'bbbb2222', pgid: 202, startTime: 6000 });
    const gone = slotLine({ id: 'cccc3333', pgid: 303, startTime: 7000 });
    const { fd, file } = table([b, slotLine(undefined), a, gone]);
    const link = new GuardianLink(silent);
    link.adopt({ pid: 1, pipe: -1, table: fd });
    // Written in place while adopting: the guardian reads the table as the old image left it.
    link.add('aaaa1111', 101);
    expect(readFileSync(file, 'latin1')).toBe(b + slotLine(undefined) + a + gone);
    link.add('bbbb2222', 202);
    expect(readFileSync(file, 'latin1')).toBe(b + slotLine(undefined) + a + gone);
    link.settled();
    // cccc3333 was not taken back (lost): its slot is freed, the table ends after the last one used.
    expect(readFileSync(file, 'latin1')).toBe(b + slotLine(undefined) + a);
    // A new session takes the lowest free slot.
    link.add('dddd4444', 404);
    const now = readFileSync(file, 'latin1');
    expect(now.slice(0, SLOT_BYTES)).toBe(b);
    expect(now.slice(SLOT_BYTES, 2 * SLOT_BYTES)).toMatch(/^dddd4444 404 - \d+ *\n$/);
    expect(now.slice(2 * SLOT_BYTES)).toBe(a);
    link.remove('aaaa1111');
    expect(readFileSync(file, 'latin1').slice(2 * SLOT_BYTES)).toBe(slotLine(undefined));
  });

  it('a session whose process group is not the one in its slot is written again, in a slot of its own', () => {
    const a = slotLine({ id: 'aaaa1111', pgid: 101, startTime: 5000 });
    const { fd, file } = table([a]);
    const link = new GuardianLink(silent);
    link.adopt({ pid: 1, pipe: -1, table: fd });
    link.add('aaaa1111', 999);
    link.settled();
    expect(readFileSync(file, 'latin1')).toMatch(/^aaaa1111 999 - \d+ *\n$/);
  });
});
