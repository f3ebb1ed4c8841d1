import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readlinkSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PROCCTL, startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import { cli, cliOn, killChildren } from './run.js';

let d: TestDaemon;
let run: ReturnType<typeof cliOn>;

beforeAll(async () => {
  d = await startDaemon({ config: { scopes: { guarded: { token: 'sekrit' } }, adminToken: 'op3rator' } });
  run = cliOn(d.socket);
});
afterEach(killChildren);
afterAll(stopAllDaemons);

describe('procctl exec', () => {
  it("runs where you are: the caller's directory unless --cwd says otherwise", async () => {
    const here = mkdtempSync(join(tmpdir(), 'procctl-here-'));
    try {
      const r = await cli(['--socket', d.socket, 'exec', '--', 'pwd'], { cwd: here });
      expect(r.stdout).toBe(`${realpathSync(here)}\n`);
      const there = await cli(['--socket', d.socket, 'exec', '--cwd', '/', '--', 'pwd'], { cwd: here });
      expect(there.stdout).toBe('/\n');
    } finally {
      rmSync(here, { recursive: true, force: true });
    }
  });

  it("a command's options before -- are refused with the hint to put the command after --", async () => {
    const r = await run(['exec', 'ls', '-la']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '-la'");
    expect(r.stderr).toContain('put the command after --');
  });

  it('prints the output of a finished command, stdout and stderr apart, and exits 0', async () => {
    const r = await run(['exec', '--', 'echo hello; echo oops >&2']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('hello\n');
    expect(r.stderr).toBe('oops\n');
  });

  it("exits with the command's own status, naming the code on stderr", async () => {
    const r = await run(['exec', '--', 'echo partial; exit 3']);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('partial\n');
    expect(r.stderr).toContain('(Command exited with code 3)');
  });

  it("exits 127, the shell's status, when the command cannot be found", async () => {
    const r = await run(['exec', '--', 'no-such-command-procctl-test']);
    expect(r.code).toBe(127);
    expect(r.stderr).toContain('command not found');
  });

  it('prints the raw result with --json', async () => {
    const r = await run(['--json', 'exec', '--env', 'GREETING=hi there', '--', 'echo "$GREETING"']);
    expect(r.code).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result).toMatchObject({ status: 'completed', exitCode: 0, output: 'hi there\n' });
    expect(typeof result.sessionId).toBe('string');
  });

  it('runs several words after -- as an argument vector, shell syntax included as words', async () => {
    const r = await run(['exec', '--', 'echo', 'a', '&&', 'echo', 'b']);
    expect(r.stdout).toBe('a && echo b\n');
  });

  it('keeps a command running with --bg and prints its session id', async () => {
    const r = await run(['exec', '--bg', '--', 'sleep 30']);
    expect(r.code).toBe(0);
    const id = /Session (\S+) is still running/.exec(r.stdout)?.[1];
    expect(id).toBeTruthy();
    expect(r.stderr).toContain(`procctl kill ${id}`);
    const k = await run(['kill', id!, '--grace', '500']);
    expect(k.code).toBe(0);
  });

  it('reports an error from the daemon with exit 1', async () => {
    const r = await run(['exec', '--cwd', '/no/such/dir', '--', 'true']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^procctl: `--cwd \/no\/such\/dir` is not an existing directory/);
  });
});

describe('where procctl exec runs a command (SPEC §11)', () => {
  let here: string;
  beforeAll(() => {
    here = realpathSync(mkdtempSync(join(tmpdir(), 'procctl-cwd-')));
  });
  afterAll(() => rmSync(here, { recursive: true, force: true }));

  it("runs in the caller's current directory, not the daemon's, in the foreground and with --bg", async () => {
    expect(readlinkSync(`/proc/${d.proc.pid}/cwd`)).not.toBe(here);
    const r = await cli(['--socket', d.socket, 'exec', '--', 'pwd'], { cwd: here });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`${here}\n`);
    const bg = await cli(['--socket', d.socket, '--json', 'exec', '--bg', '--', 'pwd'], { cwd: here });
    const { sessionId } = JSON.parse(bg.stdout);
    const c = await d.client();
    try {
      const polled = await c.process({ action: 'poll', sessionId, timeout: 10_000 });
      expect(polled.output).toBe(`${here}\n`);
    } finally {
      c.close();
    }
  });

  it('--cwd overrides it', async () => {
    mkdirSync(join(here, 'sub'), { recursive: true });
    const r = await cli(['--socket', d.socket, 'exec', '--cwd', join(here, 'sub'), '--', 'pwd'], { cwd: '/' });
    expect(r.stdout).toBe(`${join(here, 'sub')}\n`);
  });

  it('says so, and exits 2, when the current directory has been removed', () => {
    const gone = join(here, 'gone');
    mkdirSync(gone);
    const r = spawnSync('bash', ['-c', 'cd "$1" && rmdir "$1" && exec "$2" "$3" --socket "$4" exec -- pwd', 'bash', gone, process.execPath, PROCCTL, d.socket], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toBe('procctl: the current directory no longer exists; cd to one that does, or pass --cwd DIR\n');
  });
});

describe('procctl exec without --', () => {
  it("suggests -- when the command's own option was taken for procctl's, keeping procctl's options in front", async () => {
    const r = await run(['exec', '--bg', 'ls', '-la', 'a b']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("procctl: unknown option '-la'\n(to pass options to the command, put the command after --: procctl exec --bg -- ls -la 'a b')\n");
  });

  it('does not for a mistyped option of its own, which gets its suggestion', async () => {
    const r = await run(['exec', '--bgg', 'ls']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Did you mean --bg?');
    expect(r.stderr).not.toContain('put it after --');
  });
});

describe('procctl global options, usage and reachability', () => {
  it('exits 2 on an unknown flag', async () => {
    const r = await run(['ps', '--no-such-flag']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '--no-such-flag'");
  });

  it('exits 2 on a malformed flag value', async () => {
    expect((await run(['exec', '--env', 'NOEQUALS', '--', 'true'])).code).toBe(2);
    expect((await run(['poll', 'x', '--wait', 'soon'])).code).toBe(2);
  });

  it('exits 2 when kill has neither an id nor --all', async () => {
    const r = await run(['kill']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('kill needs a session id');
  });

  it('exits 3 with a hint when no daemon listens on the socket', async () => {
    const socket = `${d.dir}/nobody-here.sock`;
    const r = await cli(['--socket', socket, 'ps']);
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(
      `procctl: cannot reach procctld at ${socket} (no socket there); start it with \`procctld\` (or \`procctl --socket ${socket} daemon\`; in a checkout, \`npm start\`) or pass --socket\n`,
    );
  });

  it('sends --token (or $PROCCTL_TOKEN) for a scope that needs one', async () => {
    const refused = await run(['--scope', 'guarded', 'ps']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('needs its token');
    expect((await run(['--scope', 'guarded', '--token', 'sekrit', 'ps'])).stdout).toBe('No sessions.\n');
    const viaEnv = await cli(['--socket', d.socket, 'exec', '--', 'echo ok'], { env: { PROCCTL_SCOPE: 'guarded', PROCCTL_TOKEN: 'sekrit' } });
    expect(viaEnv.stdout).toBe('ok\n');
  });

  it("--scope '*' with the admin token shows every scope's sessions with a SCOPE column, and kills by id in any scope", async () => {
    const mine = JSON.parse((await run(['--scope', 'guarded', '--token', 'sekrit', '--json', 'exec', '--bg', '--', 'sleep 600'])).stdout);
    const theirs = JSON.parse((await run(['--scope', 'elsewhere', '--json', 'exec', '--', 'echo elsewhere'])).stdout);
    const admin = ['--scope', '*', '--token', 'op3rator'];
    const ps = await run([...admin, 'ps']);
    expect(ps.code).toBe(0);
    expect(ps.stdout.split('\n')[0]).toMatch(/^ID\s+SCOPE\s+STATUS\s+PID\s+RUNTIME\s+(CPU\s+MEM\s+)?NAME$/);
    expect(ps.stdout).toMatch(new RegExp(`^${mine.sessionId}\\s+guarded\\s+running`, 'm'));
    expect(ps.stdout).toMatch(new RegExp(`^${theirs.sessionId}\\s+elsewhere\\s+completed`, 'm'));
    expect((await run([...admin, 'kill', mine.sessionId])).code).toBe(0);
    expect((await run(['--scope', '*', 'ps'])).code).toBe(1);
    // A scope's own view has no SCOPE column.
    expect((await run(['--scope', 'elsewhere', 'ps'])).stdout.split('\n')[0]).toMatch(/^ID\s+STATUS/);
  });

  it('a job in a scope that needs a token reports checkpoints with its own key, and only for itself', async () => {
    const procctl = `${JSON.stringify(process.execPath)} ${JSON.stringify(PROCCTL)}`;
    const job = `${procctl} checkpoint halfway --data '{"done":5}' && echo reported; ` +
      `PROCCTL_SESSION_ID=someone-else ${procctl} checkpoint theirs 2>&1; echo "other: $?"; ` +
      `env -u PROCCTL_CHECKPOINT_KEY ${procctl} checkpoint keyless 2>&1; echo "keyless: $?"`;
    const r = await run(['--scope', 'guarded', '--token', 'sekrit', '--json', 'exec', '--', job]);
    const result = JSON.parse(r.stdout);
    expect(result.output).toContain('reported');
    expect(result.output).toMatch(/forbidden|not the key of that session/);
    expect(result.output).toContain('other: 1');
    expect(result.output).toContain('needs its token');
    expect(result.output).toContain('keyless: 1');
    const ps = JSON.parse((await run(['--scope', 'guarded', '--token', 'sekrit', '--json', 'ps'])).stdout);
    const mine = ps.sessions.find((s: { sessionId: string }) => s.sessionId === result.sessionId);
    expect(mine.checkpoint).toMatchObject({ name: 'halfway', data: { done: 5 } });
    expect(JSON.stringify(ps), 'the key is never shown').not.toContain('checkpointKey');
  });

  it('finds the socket through $PROCCTL_SOCKET', async () => {
    const r = await cli(['status'], { env: { PROCCTL_SOCKET: d.socket } });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`socket:   ${d.socket}`);
  });
});
