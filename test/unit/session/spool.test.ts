import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DiskHealth, type DiskState } from '../../../src/session/disk.js';
import { backlogBytes, freeBlockCount, Spool } from '../../../src/session/spool.js';
import { capPage, pageLines, pageText } from '../../../src/tools/process/log.js';
import fc from 'fast-check';

const MiB = 1024 * 1024;
const root = mkdtempSync(join(tmpdir(), 'procctl-spool-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
const fresh = () => join(root, `case-${++n}`);

/** Bytes of the spool's segments on disk. */
function onDisk(file: string): number {
  let size = 0;
  for (const f of [file, `${file}.1`]) if (existsSync(f)) size += statSync(f).size;
  return size;
}

/** A DiskHealth that records every change it tells. */
function health(): { disk: DiskHealth; told: DiskState[] } {
  const told: DiskState[] = [];
  return { disk: new DiskHealth((state) => told.push(state)), told };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('Spool', () => {
  it('a stream faster than the disk budget keeps its newest part, and the drop is counted as the budget', async () => {
    const dir = fresh();
    mkdirSync(dir);
    const file = join(dir, 's.log');
    const spool = new Spool(file, 64 * MiB);
    // 30 MiB in one turn of the loop: far past the backlog a session may hold.
    for (let i = 0; i < 30; i++) spool.write(Buffer.alloc(MiB, 65 + (i % 26)));
    await spool.close();
    expect(spool.totalBytes).toBe(30 * MiB);
    expect(spool.dropped.rotated).toBe(0);
    expect(spool.dropped.fault).toBe(0);
    expect(spool.dropped.budget).toBeGreaterThan(0);
    expect(spool.dropped.budget + onDisk(file)).toBe(30 * MiB);
    // What is kept is the newest output, whole and in order.
    const kept = spool.read();
    const expected = Array.from({ length: 30 }, (_, i) => String.fromCharCode(65 + (i % 26)).repeat(MiB)).join('');
    expect(kept === expected.slice(expected.length - kept.length)).toBe(true);
  });

  it('sessions outrunning the disk at once share one bound: each keeps its newest part, the rest counted as the budget', async () => {
    const dir = fresh();
    mkdirSync(dir);
    const before = backlogBytes();
    const spools = Array.from({ length: 4 }, (_, i) => new Spool(join(dir, `s${i}.log`), 64 * MiB));
    // 16 MiB each in one turn of the loop: alone, each would hold a backlog of 8 MiB (32 MiB in all).
    for (let j = 0; j < 16; j++) for (const [i, spool] of spools.entries()) spool.write(Buffer.alloc(MiB, 65 + ((i * 16 + j) % 26)));
    expect(backlogBytes() - before).toBeLessThanOrEqual(16 * MiB);
    // The same from what each says: its first MiB went to the disk at once, the rest waits or was dropped.
    const budgetDrops = spools.reduce((n, s) => n + s.dropped.budget, 0);
    expect(4 * 15 * MiB - budgetDrops).toBeLessThanOrEqual(16 * MiB);
    await Promise.all(spools.map((s) => s.close()));
    expect(backlogBytes()).toBe(before);
    for (const [i, spool] of spools.entries()) {
      const file = join(dir, `s${i}.log`);
      expect(spool.totalBytes).toBe(16 * MiB);
      expect(spool.dropped.budget).toBeGreaterThan(0);
      expect(spool.dropped.budget + spool.dropped.rotated + onDisk(file)).toBe(16 * MiB);
      // What is kept is its newest output, whole and in order.
      const kept = spool.read();
      const all = Array.from({ length: 16 }, (_, j) => String.fromCharCode(65 + ((i * 16 + j) % 26)).repeat(MiB)).join('');
      expect(kept.length).toBeGreaterThanOrEqual(MiB);
      expect(kept === all.slice(all.length - kept.length)).toBe(true);
    }
  });

  it('keeps the bytes it was handed though the caller reuses its buffer at once (every pipe is read into one), and gives its blocks back', async () => {
    const dir = fresh();
    mkdirSync(dir);
    const file = join(dir, 's.log');
    const spool = new Spool(file, 64 * MiB);
    const reused = Buffer.alloc(65536);
    const expected: Buffer[] = [];
    // Reads of every size, some not a block's multiple, some across the blocks' edges, in one turn of the loop and across turns.
    for (let i = 0; i < 200; i++) {
      const n = [1, 100, 4095, 65536, 30_000, 65535][i % 6];
      reused.fill(65 + (i % 26), 0, n);
      reused[0] = 48 + (i % 10);
      expected.push(Buffer.from(reused.subarray(0, n)));
      spool.write(reused.subarray(0, n));
      reused.fill(0x23);
      if (i % 50 === 49) await new Promise((r) => setImmediate(r));
    }
    await spool.close();
    const want = Buffer.concat(expected);
    expect(spool.totalBytes).toBe(want.length);
    expect(spool.droppedBytes).toBe(0);
    expect(spool.read() === want.toString('latin1')).toBe(true);
    expect(backlogBytes()).toBe(0);
    // Its blocks are back on the free list for the next spool: none was lost to a reference left behind.
    expect(freeBlockCount()).toBeGreaterThan(0);
  });

  it('a refused write is counted with its error, told once, and writing resumes by itself', async () => {
    const dir = fresh(); // not created yet: opening the spool fails
    const file = join(dir, 's.log');
    const { disk, told } = health();
    const spool = new Spool(file, 64 * MiB, disk);
    spool.write('first\n');
    await spool.drained();
    for (let i = 0; i < 100; i++) spool.write('refused\n');
    expect(spool.fault).toMatch(/ENOENT/);
    expect(spool.faulted).toBe(true);
    expect(spool.dropped.fault).toBe(6 + 100 * 8);
    expect(told).toEqual([{ writable: false, error: spool.fault }]);
    expect(disk.writable).toBe(false);

    mkdirSync(dir);
    let resumed = 0;
    await until(() => {
      spool.write('again\n');
      resumed++;
      return existsSync(file);
    }, 'the spool to be written again');
    await spool.close();
    expect(told).toEqual([{ writable: false, error: spool.fault }, { writable: true }]);
    const kept = spool.read();
    expect(kept.length).toBeGreaterThan(0);
    expect(kept).toBe('again\n'.repeat(kept.length / 6));
    expect(spool.dropped.fault + onDisk(file)).toBe(spool.totalBytes);
    expect(spool.counts()).toMatchObject({ totalBytes: spool.totalBytes, droppedBytes: spool.dropped.fault, fault: expect.stringMatching(/ENOENT/) });
    expect(resumed).toBeGreaterThan(0);
  });

  it('once removed it never writes or creates its file again, even with a write in flight', async () => {
    const dir = fresh();
    mkdirSync(dir);
    const file = join(dir, 's.log');
    const spool = new Spool(file, 64 * MiB);
    for (let i = 0; i < 4; i++) spool.write(Buffer.alloc(MiB, 66));
    spool.remove();
    rmSync(file, { force: true });
    spool.write('after\n');
    await spool.close();
    expect(existsSync(file)).toBe(false);
    expect(existsSync(`${file}.1`)).toBe(false);
  });

  it('restores the counts of each cause from a record, and older records that had only a total', () => {
    const dir = fresh();
    mkdirSync(dir);
    const file = join(dir, 's.log');
    const now = Spool.restore(file, { totalBytes: 10, droppedBytes: 6, dropped: { rotated: 1, budget: 2, fault: 3 }, fault: 'EACCES' });
    expect(now?.dropped).toEqual({ rotated: 1, budget: 2, fault: 3 });
    expect(now?.fault).toBe('EACCES');
    const old = Spool.restore(file, { totalBytes: 10, droppedBytes: 4 });
    expect(old?.dropped).toEqual({ rotated: 4, budget: 0, fault: 0 });
  });
});

describe('Spool.page', () => {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-spool-page-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let n = 0;

  it('property: the page of the whole decoded text, read in blocks of any size, across both segments', async () => {
    const opt = fc.option(fc.nat({ max: 8 }), { nil: undefined });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.string({ unit: fc.constantFrom('a', 'b', '\n', 'é', '😀', '€'), maxLength: 12 }), { maxLength: 8 }),
        opt,
        opt,
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 40 }),
        async (chunks, offset, limit, block, cap) => {
          // A small cap on disk: the older segment rotates, so the page spans both files.
          const spool = new Spool(join(dir, `p${n++}.log`), 64);
          for (const c of chunks) spool.write(Buffer.from(c, 'utf8'));
          await spool.close();
          const text = spool.read();
          const fromEnd = offset === undefined;
          const want = pageText(text, offset, limit);
          const got = spool.page((total) => pageRangeOf(total, offset, limit), cap, fromEnd, block);
          const capped = capPage(want.output, cap, fromEnd);
          expect({ output: got.output, cut: got.cut }).toEqual(capped);
          expect([got.from, got.to - got.from, got.totalLines, got.totalChars, got.start]).toEqual([want.from, want.lines, want.totalLines, text.length, want.lines > 0 ? want.start : got.start]);
        },
      ),
      { numRuns: 300 },
    );
  });
});

/** The lines pageText would take, for Spool.page. */
function pageRangeOf(total: number, offset: number | undefined, limit: number | undefined): { from: number; to: number } {
  const lines = Array.from({ length: total }, () => '');
  const page = pageLines(lines, offset, limit);
  return { from: page.from, to: page.from + page.lines.length };
}
