import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DAEMON_NODE_FLAGS } from '../../../src/base/node-flags.js';
import { ROOT, waitFor } from '../../helpers/daemon.js';

const BIN = join(ROOT, 'bin', 'procctld');
const started: ChildProcess[] = [];
const dirs: string[] = [];

// Stopped as a person stops it (SIGTERM: its guardian and its cgroups go with it), by pid; SIGKILL if it will not.
afterEach(async () => {
  for (const child of started.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const late = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await gone;
    clearTimeout(late);
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

// The daemon's node flags are given in two ways: by bin/procctld's first line, when it is run as
// a program (the README's command, the systemd unit's ExecStart=procctld), and by whoever starts it
// with node (the unit `procctl daemon install` writes, an MCP client's start, the bench). One list.
describe("procctld's node flags", () => {
  it("bin/procctld's first line gives node the flags base/node-flags.ts names", () => {
    const first = readFileSync(BIN, 'utf8').split('\n')[0];
    expect(first).toBe(`#!/usr/bin/env -S node ${DAEMON_NODE_FLAGS.join(' ')}`);
  });

  it('a daemon started as a program runs under node with them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'procctl-flags-'));
    dirs.push(dir);
    const child = spawn(BIN, ['--socket', join(dir, 'd.sock')], {
      env: { ...process.env, PROCCTL_STATE_DIR: join(dir, 'state'), XDG_CONFIG_HOME: join(dir, 'config') },
      stdio: 'ignore',
    });
    started.push(child);
    // The kernel's record of what the process was started with: node, its flags, then the program.
    const argv = await waitFor(
      () => {
        try {
          const a = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
          return a.some((x) => x.endsWith('node') || x === process.execPath) ? a : undefined;
        } catch {
          return undefined;
        }
      },
      { what: 'procctld to be running under node' },
    );
    const at = argv.findIndex((x) => x.endsWith('/procctld'));
    expect(argv.slice(1, at)).toEqual([...DAEMON_NODE_FLAGS]);
  });
});
