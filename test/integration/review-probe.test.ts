import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';

const dirs: string[] = [];
afterEach(stopAllDaemons);
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * The review probe (can this host mount an overlay? SPEC §16) runs `unshare`, `mount` and a shell
 * the first time daemon.status or a review exec asks. Run on the daemon's thread it held every
 * other request until it ended (176 ms with 1,000 sessions on a quiet machine, 1.4 s loaded).
 */
describe('the review probe', () => {
  it('runs off the daemon\'s thread: other requests are answered while it runs, and status answers once it ends', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'procctl-probe-'));
    dirs.push(dir);
    const started = join(dir, 'started');
    const gate = join(dir, 'gate');
    // An `unshare` first on the daemon's PATH that says it started, then waits for the test's word, then fails.
    writeFileSync(
      join(dir, 'unshare'),
      `#!/bin/sh\n: > '${started}'\nwhile [ ! -e '${gate}' ]; do sleep 0.02; done\necho 'unshare: the test said no' >&2\nexit 1\n`,
    );
    chmodSync(join(dir, 'unshare'), 0o755);
    const d = await startDaemon({ env: { PATH: `${dir}:${process.env.PATH}` } });
    const a = await d.client();
    const b = await d.client();
    const order: string[] = [];
    const status = a.call('daemon.status').then((r: any) => {
      order.push('status');
      return r;
    });
    try {
      await waitFor(() => existsSync(started), { what: 'the probe\'s unshare to start' });
      const listed = await b.call('process', { action: 'list' });
      order.push('list');
      expect(listed.total).toBe(0);
    } finally {
      writeFileSync(gate, '');
    }
    const answer = await status;
    // The gate is opened only once the list is answered, so a probe that held the thread ran
    // into its own time limit instead of reading the fake's words (and the list came after it).
    expect(order).toEqual(['list', 'status']);
    expect(answer.changes.review).toBe(false);
    expect(answer.changes.reason).toContain('the test said no');
    a.close();
    b.close();
  });
});
