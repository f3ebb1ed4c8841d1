import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROCCTL, startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { cli, cliDaemon, type CliDaemon } from '../cli/run.js';

let d: TestDaemon;
cliDaemon((x: CliDaemon) => ({ d } = x));

const request = (id: number, method: string, params: Record<string, unknown> = {}) => `${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`;

/** What the daemon answers on its socket directly to `input`, once it has sent `lines` lines. */
function direct(socket: string, input: string, lines: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(socket, () => s.write(input));
    let got = '';
    s.setEncoding('utf8').on('data', (data: string) => {
      got += data;
      if (got.split('\n').length > lines) {
        s.destroy();
        resolve(got);
      }
    });
    s.on('error', reject);
  });
}

describe('procctl dial-stdio', () => {
  it('carries the protocol byte for byte, answers what was asked before end of input, and exits 0', async () => {
    // Two requests in one write, one of them with characters beyond ASCII.
    const input = request(1, 'tools.list') + request(2, 'exec', { command: "printf '%s' 'héllo ✓ 𝄞 🙂'" });
    const bridged = await cli(['--socket', d.socket, 'dial-stdio'], { input });
    expect(bridged.code).toBe(0);
    expect(bridged.stderr).toBe('');
    const lines = bridged.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    // Answered as they finish, not necessarily in order.
    expect(lines.map((l) => l.id).sort()).toEqual([1, 2]);
    expect(lines.find((l) => l.id === 2).result.output).toBe('héllo ✓ 𝄞 🙂');
    // The same bytes as the daemon sends on its socket.
    const tools = bridged.stdout.split('\n').find((l) => l.startsWith('{"jsonrpc":"2.0","id":1,'));
    expect(tools).toBe((await direct(d.socket, request(1, 'tools.list'), 1)).split('\n')[0]);
  });

  it('ends with status 0 when the daemon closes, though its stdin is still open', async () => {
    const own = await startDaemon();
    const bridge = spawn(process.execPath, [PROCCTL, '--socket', own.socket, 'dial-stdio'], { stdio: ['pipe', 'pipe', 'pipe'] });
    const exited = new Promise<number | null>((resolve) => bridge.on('close', (code) => resolve(code)));
    let out = '';
    bridge.stdout.setEncoding('utf8').on('data', (data: string) => (out += data));
    bridge.stdin.write(request(1, 'subscribe'));
    await waitFor(() => out.includes('"id":1'), { what: 'the subscription to be answered' });
    await own.stop();
    expect(await exited).toBe(0);
    bridge.stdin.destroy();
  });

  it('says the daemon cannot be reached with the hint, and exits 3', async () => {
    const r = await cli(['--socket', join(d.dir, 'nobody.sock'), 'dial-stdio']);
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(`procctl: cannot reach procctld at ${join(d.dir, 'nobody.sock')} (no socket there); start it with \`procctld\` (or \`procctl daemon\`; in a checkout, \`npm start\`) or pass --socket\n`);
  });

  it("always bridges to this host's daemon: $PROCCTL_HOST is not followed, --host is refused", async () => {
    const r = await cli(['--socket', d.socket, 'dial-stdio'], { input: request(1, 'tools.list'), env: { PROCCTL_HOST: 'ssh://nowhere.invalid' } });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).id).toBe(1);
    const refused = await cli(['--host', 'ssh://nowhere.invalid', 'dial-stdio']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--host does not apply to it');
  });
});
