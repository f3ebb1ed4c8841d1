import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Spool } from '../../../src/session/spool.js';
import { spoolDropNote } from '../../../src/tools/process/log.js';

const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), 'procctl-note-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('what log says the spool is missing', () => {
  it('names the disk budget when a burst outran it, not maxLogBytes', async () => {
    const spool = new Spool(join(dir, 'burst.log'), 64 * MiB);
    for (let i = 0; i < 24; i++) spool.write(Buffer.alloc(MiB, 97));
    await spool.close();
    const note = spoolDropNote(spool, 64 * MiB);
    expect(note).toContain(`${spool.droppedBytes} earlier bytes are missing: ${spool.dropped.budget} came faster than the spool's disk budget of 16 MiB/s`);
    expect(note).not.toMatch(/rotated|maxLogBytes|refused/);
  });

  it('names each cause with its own count', () => {
    const spool = Spool.restore(join(dir, 'none.log'), {
      totalBytes: 100,
      droppedBytes: 60,
      dropped: { rotated: 10, budget: 20, fault: 30 },
      fault: 'ENOSPC: no space left on device',
    })!;
    expect(spoolDropNote(spool, 1000)).toBe(
      "[the spool keeps the newest output: 60 earlier bytes are missing: 10 rotated away (maxLogBytes = 1000); 20 came faster than the spool's disk budget of 16 MiB/s and were dropped before reaching the disk; 30 were not spooled because the state directory refused writes (ENOSPC: no space left on device). Lines count from the oldest kept, and the first may be partial]",
    );
  });
});
