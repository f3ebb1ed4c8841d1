import { chmodSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { findProgram } from '../../src/base/executable.js';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { hostScratch, killMarked, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * What daemon.status says of the sandbox, and what an exec uses, follow the host as it is now
 * (docs/sandbox.md "When the host changes"): bwrap installed, upgraded or removed after the
 * daemon started is seen without a reload, by status and by the next exec alike.
 */

// Outside /tmp: the sandbox mounts a private one, and the programs found here are run inside it.
const root = hostScratch('procctl-sbxh-');
const dirIn = (name: string) => {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  return dir;
};
const ids = new Set<string>();

afterEach(async () => {
  await stopAllDaemons();
});
afterAll(() => {
  killMarked(ids);
  rmSync(root, { recursive: true, force: true });
});

/** The real bwrap, found on the test's own PATH (undefined when not installed). */
const REAL_BWRAP = findProgram('bwrap', process.env.PATH);

/**
 * A directory to be the daemon's whole PATH: the programs the sandbox's check runs besides
 * bwrap (links to the real ones), and no bwrap until `install` puts one there.
 */
function binWithoutBwrap(name: string): string {
  const bin = dirIn(name);
  // `true`: the probe runs it by name, through env.
  for (const program of ['env', 'true', 'prlimit', 'setpriv', 'unshare', 'mount', 'getent', 'id']) {
    const real = findProgram(program, process.env.PATH);
    if (real) symlinkSync(real, join(bin, program));
  }
  return bin;
}

/** Put `file` at `bin`/bwrap as a package manager does: written beside it, then renamed over (a new file). */
function install(bin: string, write: (at: string) => void): void {
  const beside = join(dirIn('staging'), `bwrap-${Date.now()}-${Math.random().toString(36).slice(2)}`);
  write(beside);
  renameSync(beside, join(bin, 'bwrap'));
}

const linkToReal = (at: string) => symlinkSync(REAL_BWRAP!, at);
const script = (body: string) => (at: string) => {
  writeFileSync(at, `#!/bin/sh\n${body}\n`);
  chmodSync(at, 0o755);
};
/** A bwrap that fails the way a host refusing user namespaces makes it fail. */
const refusing = script("echo 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1");

const sandboxOf = async (d: TestDaemon) => {
  const c = await d.client();
  try {
    return (await c.call('daemon.status')) as { sandbox: { mode: string; available: boolean; reason?: string }; config: { lastReload?: unknown } };
  } finally {
    c.close();
  }
};

/** Wait until daemon.status's sandbox says `available` (generous: a look at the host is every few seconds, a probe is a process). */
async function untilAvailable(d: TestDaemon, available: boolean, reason?: string): Promise<void> {
  await waitFor(
    async () => {
      const st = (await sandboxOf(d)).sandbox;
      return (st.available === available && (reason === undefined || (st.reason ?? '').includes(reason))) || undefined;
    },
    { what: `daemon.status to say the sandbox is ${available ? 'available' : `unavailable (${reason})`}`, timeoutMs: 30_000, everyMs: 100 },
  );
}

describe('daemon.status follows the host, without a reload', () => {
  it('with the sandbox off: bwrap installed after the start makes it available; replaced by one that fails, unavailable again', async () => {
    const bin = binWithoutBwrap('bin-off');
    const d = await startDaemon({ config: {}, env: { PATH: bin } });
    const first = await sandboxOf(d);
    expect(first.sandbox).toMatchObject({ mode: 'off', available: false });
    expect(first.sandbox.reason).toContain("bwrap is not on the daemon's PATH");

    // The real one where it can make a sandbox here, else one that succeeds as it would.
    install(bin, SKIP_SANDBOX ? script('exit 0') : linkToReal);
    await untilAvailable(d, true);
    // An upgrade that no longer works: the same path, another file.
    install(bin, refusing);
    await untilAvailable(d, false, 'bwrap cannot create the sandbox on this host: bwrap: No permissions to creating new namespace');
    expect((await sandboxOf(d)).config.lastReload).toBeUndefined();
  });
});

describe.skipIf(SKIP_SANDBOX)('an exec under the sandbox uses the host as it is now, as status says', () => {
  it('bwrap removed: status unavailable and the exec refused naming the fix; put back: both see it', async () => {
    const bin = binWithoutBwrap('bin-ro');
    install(bin, linkToReal);
    const d = await startDaemon({ config: { sandbox: { mode: 'read-only' } }, env: { PATH: bin } });
    const c = await d.client();
    try {
      const s = new Scoped(c, 'host');
      const before = await s.exec({ command: 'echo inside', yieldMs: 30_000 });
      ids.add(before.sessionId);
      expect(before).toMatchObject({ status: 'completed', output: 'inside\n' });

      rmSync(join(bin, 'bwrap'));
      await untilAvailable(d, false, "bwrap is not on the daemon's PATH");
      const refused = await c.request('exec', { scope: 'host', command: 'echo never', yieldMs: 30_000 });
      expect(JSON.stringify(refused)).toContain("bwrap is not on the daemon's PATH");
      expect(JSON.stringify(refused)).toContain('apt-get install -y bubblewrap');
      expect(JSON.stringify(refused)).not.toContain('never\\n');

      install(bin, linkToReal);
      await untilAvailable(d, true);
      const after = await s.exec({ command: 'echo back', yieldMs: 30_000 });
      ids.add(after.sessionId);
      expect(after).toMatchObject({ status: 'completed', output: 'back\n' });
      expect((await sandboxOf(d)).config.lastReload).toBeUndefined();
    } finally {
      c.close();
    }
  });
});
