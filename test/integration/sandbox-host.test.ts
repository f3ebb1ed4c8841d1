import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { findProgram } from '../../src/base/executable.js';
import { alive, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { RpcResponse } from '../helpers/rpc.js';
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

describe.skipIf(SKIP_SANDBOX)('an exec that finds the host changed has the check made again off the loop', () => {
  it('bwrap removed and put back: the next execs see it by themselves, no status asked', async () => {
    const bin = binWithoutBwrap('bin-exec');
    install(bin, linkToReal);
    const d = await startDaemon({ config: { sandbox: { mode: 'read-only' } }, env: { PATH: bin } });
    const c = await d.client();
    try {
      const exec = async (command: string) => {
        const r = await c.request('exec', { scope: 'host', command, yieldMs: 30_000 });
        if (r.result?.sessionId) ids.add(r.result.sessionId);
        return r;
      };
      rmSync(join(bin, 'bwrap'));
      // Within the bound status has (a look at the host every few seconds): then refused naming the fix, nothing run.
      const refused = await waitFor(async () => {
        const r = await exec('echo never');
        return JSON.stringify(r).includes("bwrap is not on the daemon's PATH") ? r : undefined;
      }, { what: 'an exec to see bwrap gone', timeoutMs: 30_000, everyMs: 200 });
      expect(JSON.stringify(refused)).toContain('apt-get install -y bubblewrap');
      expect(JSON.stringify(refused)).not.toContain('never\\n');

      install(bin, linkToReal);
      const back = await waitFor(async () => {
        const r = await exec('echo back');
        return r.result?.status === 'completed' ? r : undefined;
      }, { what: 'an exec to see bwrap back', timeoutMs: 30_000, everyMs: 200 });
      expect(back.result).toMatchObject({ status: 'completed', output: 'back\n' });
    } finally {
      c.close();
    }
  });

  it('while bwrap is probed for an exec, the daemon answers others; the exec then runs under it', async () => {
    const bin = binWithoutBwrap('bin-gated');
    const hold = join(root, 'gate-hold');
    const probing = join(root, 'gate-probing');
    // The real bwrap, but its probe (a command line ending in `--default-signal true`) waits while `hold` exists, saying its pid.
    const gated = script(
      [
        'PATH=/usr/bin:/bin',
        `case "$*" in *"--default-signal true") if [ -e ${hold} ]; then echo $$ > ${probing}; while [ -e ${hold} ]; do sleep 0.05; done; fi;; esac`,
        `exec ${REAL_BWRAP} "$@"`,
      ].join('\n'),
    );
    install(bin, gated);
    const d = await startDaemon({ config: { sandbox: { mode: 'read-only' } }, env: { PATH: bin } });
    const c = await d.client();
    const other = await d.client();
    try {
      writeFileSync(hold, '');
      // Another file at the same path: the host changed, and the next exec that looks has bwrap probed again.
      install(bin, gated);
      let exec: { answer: Promise<RpcResponse>; done: boolean } | undefined;
      await waitFor(
        () => {
          if (existsSync(probing)) return true;
          // Answered before the daemon looked at the host again: another one.
          if (exec === undefined || exec.done) {
            const sent = { answer: c.request('exec', { scope: 'host', command: 'echo probed', yieldMs: 30_000 }), done: false };
            void sent.answer.then(() => (sent.done = true));
            exec = sent;
          }
          return undefined;
        },
        { what: 'an exec to have bwrap probed', timeoutMs: 30_000, everyMs: 100 },
      );
      const probe = Number(readFileSync(probing, 'utf8'));
      // Answered while the probe still runs: the daemon did not wait for it in its loop.
      const listed = await other.request('process', { scope: 'host', action: 'list' });
      expect(listed.result).toBeDefined();
      expect(alive(probe)).toBe(true);
      expect(exec!.done).toBe(false);

      rmSync(hold);
      const r = await exec!.answer;
      if (r.result?.sessionId) ids.add(r.result.sessionId);
      expect(r.result).toMatchObject({ status: 'completed', output: 'probed\n' });
    } finally {
      rmSync(hold, { force: true });
      c.close();
      other.close();
    }
  });
});
