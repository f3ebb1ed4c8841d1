import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, Scopes, sharedDaemon } from '../helpers/session.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';

// limits.* (SPEC §12): set on every non-elevated session, sandboxed or not, through each way a
// job starts (the native spawner, a terminal, the fork fallback); a job that hits the CPU or
// file size limit ends with a reason naming it.
const fs = scratchRoot('procctl-sbxl-');
afterAll(() => fs.cleanup());

const MEMORY = 64 * 1024 * 1024;
const LIMITS = { cpuSeconds: 1, memoryBytes: MEMORY, openFiles: 32, processes: 4000, fileSizeBytes: 65_536 };
const ELEVATED = 'limits-elevated';
const config = (extra: object = {}) => ({ limits: LIMITS, scopes: { [ELEVATED]: { elevated: 'allow' } }, ...extra });

const BURN = 'while :; do :; done';
const BIG_FILE = 'head -c 1000000 /dev/zero > big';
const MANY_FILES = 'for i in $(seq 3 60); do eval "exec $i</dev/null" 2>/dev/null || { echo "refused at fd $i"; break; }; done';
// One string of 100 MB, made by bash itself: it reaches the 64 MiB limit in about 0.2 s of CPU, far
// from the 1 s CPU limit the same suite sets (reading it through a pipe took 0.9 s: the CPU limit came first).
const BIG_ALLOC = `printf -v v '%*s' 100000000 ''; echo len=\${#v}`;

function suite(name: string, opts: { config: object; env?: Record<string, string> }, extra: () => void = () => undefined) {
  describe(name, () => {
    let c: TestClient;
    let scopes: Scopes;
    sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '500', ...opts.env }, ...opts }, (x) => ({ c, scopes } = x));
    const run = async (command: string, extra: Record<string, unknown> = {}, s = scopes.next('lim')) => {
      const r = await s.exec({ command, yieldMs: 30_000, stdin: 'null', ...extra });
      scopes.track(r.pid);
      return r;
    };

    it('the CPU limit: SIGXCPU, reason cpu_limit, said in the text', async () => {
      const r = await run(BURN);
      expect(r).toMatchObject({ status: 'failed', signal: 'SIGXCPU', reason: 'cpu_limit' });
      expect(r.text).toContain('limits.cpuSeconds');
    });

    it('the CPU limit on a terminal too', async () => {
      const r = await run(BURN, { pty: true });
      expect(r).toMatchObject({ status: 'failed', signal: 'SIGXCPU', reason: 'cpu_limit' });
    });

    it('the file size limit: the file stops at the limit, SIGXFSZ, reason file_size_limit', async () => {
      const work = fs.dir(`${name}-fsize`.replace(/\W+/g, '-'));
      const r = await run(`exec ${BIG_FILE}`, { workdir: work });
      expect(r).toMatchObject({ status: 'failed', signal: 'SIGXFSZ', reason: 'file_size_limit' });
      expect(r.text).toContain('limits.fileSizeBytes');
      expect(statSync(join(work, 'big')).size).toBe(LIMITS.fileSizeBytes);
    });

    it('a shell whose child hit the file size limit exits 128+SIGXFSZ: the reason still names the limit', async () => {
      const work = fs.dir(`${name}-fsize-child`.replace(/\W+/g, '-'));
      const r = await run(`${BIG_FILE}; exit $?`, { workdir: work });
      expect(r).toMatchObject({ status: 'failed', reason: 'file_size_limit' });
      expect(r.exitCode === 128 + 25 || r.signal === 'SIGXFSZ').toBe(true);
    });

    it('the open files limit: the descriptor past it is refused', async () => {
      const r = await run(`ulimit -n; ${MANY_FILES}`);
      expect(r.output.split('\n')[0]).toBe(String(LIMITS.openFiles));
      // Below the limit: the shell and whatever started it hold a few descriptors of their own.
      const refused = Number(/^refused at fd (\d+)$/m.exec(r.output)?.[1]);
      expect(refused).toBeGreaterThan(20);
      expect(refused).toBeLessThanOrEqual(LIMITS.openFiles);
    });

    it('the memory limit: an allocation past it fails', async () => {
      const r = await run(`ulimit -v; ${BIG_ALLOC}`);
      expect(r.output.split('\n')[0]).toBe(String(MEMORY / 1024));
      expect(r.output).not.toContain('len=');
      expect(r.output).toMatch(/cannot allocate/);
      expect(r.status).toBe('completed');
      expect(r.exitCode).not.toBe(0);
    });

    it('the process limit is set (the kernel enforces it per user: see the sandbox.user tests)', async () => {
      const r = await run('ulimit -u; ulimit -Hu');
      expect(r.output).toBe(`${LIMITS.processes}\n${LIMITS.processes}\n`);
    });

    it('elevated:true runs without any of them', async () => {
      const r = await run('ulimit -t; ulimit -f; ulimit -v', { elevated: true }, new Scoped(c, ELEVATED));
      expect(r.output).toBe('unlimited\nunlimited\nunlimited\n');
    });

    extra();
  });
}

suite('limits, unsandboxed, native spawner', { config: config() });

suite('limits, unsandboxed, the fork fallback (PROCCTL_SPAWN=node: through prlimit)', { config: config(), env: { PROCCTL_SPAWN: 'node' } });

describe.skipIf(SKIP_SANDBOX)('under the sandbox', () => {
  const ids: string[] = [];
  afterAll(() => killMarked(ids));
  suite('limits, sandboxed', { config: config({ sandbox: { mode: 'workspace-write', workspaces: [fs.root] } }) });
  suite('limits, sandboxed, the fork fallback', { config: config({ sandbox: { mode: 'workspace-write', workspaces: [fs.root] } }), env: { PROCCTL_SPAWN: 'node' } });
});
