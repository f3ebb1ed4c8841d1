import { mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { findSessionProcesses } from '../../src/runner/sweep.js';

afterAll(stopAllDaemons);

/** A terminal turns each "\n" a command prints into "\r\n". */
const crlf = (text: string) => text.replaceAll('\n', '\r\n');

describe('a shell on a terminal (pty: true, SPEC §20)', () => {
  it('gives each command only what it printed, its exit code, and keeps cd and exports', async () => {
    const d = await startDaemon();
    const c = await d.client();
    const work = realpathSync(mkdtempSync(join(tmpdir(), 'procctl-shell-pty-')));
    const first = await c.exec({ command: 'cd /tmp && export GREETING=hi; plain=kept', shell: 't', pty: true, workdir: work });
    expect(first.status).toBe('completed');
    expect(first.exitCode).toBe(0);
    // No prompt, no echo of the line the daemon sent, nothing of the shell's setup.
    expect(first.output).toBe('');
    expect(first.shell).toEqual({ name: 't', cwd: '/tmp' });
    const second = await c.exec({ command: 'pwd; echo "$GREETING $plain"; [ -t 0 ] && [ -t 1 ] && echo tty; exit_code() { return 7; }; exit_code', shell: 't' });
    expect(second.status).toBe('completed');
    expect(second.output).toBe(crlf('/tmp\nhi kept\ntty\n'));
    expect(second.exitCode).toBe(7);
    // Much output right up to the end, and one with no newline at its end: every byte is the command's, nothing more.
    const many = await c.exec({ command: 'seq 1 5000; printf last', shell: 't' });
    const lines = many.output.split('\r\n');
    expect(lines).toHaveLength(5001);
    expect(lines[4999]).toBe('5000');
    expect(lines[5000]).toBe('last');
    const listed = (await c.call('shell.list', {})).shells;
    expect(listed[0]).toMatchObject({ name: 't', state: 'idle', commands: 3, settings: { pty: true } });
    // A command asking for pipes is refused, naming the shell's terminal.
    const pipes = await c.call('exec', { command: 'true', shell: 't', pty: false }).catch((e: Error) => e);
    expect(String((pipes as Error).message)).toContain('was made with pty true');
    // `exit` ends the shell with its code; the next command runs in a fresh one and says so.
    const ended = await c.exec({ command: 'echo bye; exit 3', shell: 't' });
    expect(ended.exitCode).toBe(3);
    expect(ended.output).toBe('bye\r\n');
    // Made anew as it was (on a terminal), its state gone; stdin "null" gives the command no input, the terminal is still there.
    const fresh = await c.exec({ command: 'echo "[${GREETING-}]"; [ -t 0 ] || echo no-input; stty size </dev/tty', shell: 't', stdin: 'null' });
    expect(fresh.shell.restarted).toBe(true);
    expect(fresh.output).toBe('[]\r\nno-input\r\n30 120\r\n');
    c.close();
    await d.stop();
  });

  it("is not ended early by a command that prints a marker of the daemon's, or its end record", async () => {
    const d = await startDaemon();
    const c = await d.client();
    await c.exec({ command: 'true', shell: 'f', pty: true });
    // The end record the shell writes on fd 61, and a cut of the form the shell prints on the terminal.
    const fake = 'printf "ready 0 /\\0x 0 /tmp\\0"; echo procctl-0123456789abcdef01234567; echo "__procctl_id=x"; sleep 0.3; echo done';
    const r = await c.exec({ command: fake, shell: 'f' });
    expect(r.status).toBe('completed');
    expect(r.output).toBe(crlf('ready 0 /\u0000x 0 /tmp\u0000procctl-0123456789abcdef01234567\n__procctl_id=x\ndone\n'));
    const next = await c.exec({ command: 'echo next', shell: 'f' });
    expect(next.output).toBe('next\r\n');
    c.close();
    await d.stop();
  });

  it('lets a command read the terminal (answered by write), see its size, and be interrupted without losing the shell', async () => {
    const d = await startDaemon();
    const c = await d.client();
    await c.exec({ command: 'KEEP=yes; cd /', shell: 'r', pty: true });
    const size = await c.exec({ command: 'stty size; tput cols', shell: 'r' });
    expect(size.status).toBe('completed');
    expect(size.output).toBe(crlf('30 120\n120\n'));
    // Blocked reading its terminal, the command is waiting for input; what is written is typed there (and echoed, as a terminal does).
    const r = await c.exec({ command: 'echo ask; read x; echo "got[$x]"', shell: 'r', yieldMs: 30_000 });
    expect(r.status).toBe('waiting_input');
    await c.process({ action: 'write', sessionId: r.sessionId, data: 'hello\n' });
    const done = await c.process({ action: 'wait', sessionIds: [r.sessionId], timeout: 20_000 });
    expect(done.sessions[0].status).toBe('completed');
    // (log drops the last "\n", leaving the terminal's "\r".)
    expect((await c.process({ action: 'log', sessionId: r.sessionId })).output).toBe('ask\r\nhello\r\ngot[hello]\r');
    // Ctrl-C typed on the terminal reaches the command (the terminal's foreground is the shell's group).
    const looping = await c.exec({ command: 'echo loop; sleep 300; echo never', shell: 'r', yieldMs: 300 });
    expect(looping.status).toBe('running');
    await waitFor(async () => (await c.process({ action: 'log', sessionId: looping.sessionId })).output.includes('loop'), { what: 'loop' });
    await c.process({ action: 'send-keys', sessionId: looping.sessionId, keys: ['C-c'] });
    const cut = await c.process({ action: 'wait', sessionIds: [looping.sessionId], timeout: 20_000 });
    expect(cut.sessions[0].status).not.toBe('running');
    expect((await c.process({ action: 'log', sessionId: looping.sessionId })).output).not.toContain('never');
    // A kill ends the command and its children, and keeps the shell with its state.
    const k = await c.exec({ command: 'sleep 301 & sleep 302; echo never', shell: 'r', yieldMs: 300 });
    expect(k.status).toBe('running');
    const kids = await waitFor(() => {
      const mine = (findSessionProcesses(new Set([k.sessionId])).get(k.sessionId) ?? []).map((p) => p.pid);
      return mine.length >= 2 ? mine : undefined;
    }, { what: 'the two sleeps' });
    const killed = await c.process({ action: 'kill', sessionId: k.sessionId });
    expect(killed.status).toBe('failed');
    await waitFor(() => kids.every((pid) => !alive(pid)), { what: 'the children gone' });
    const again = await c.exec({ command: 'echo "$KEEP $PWD"', shell: 'r' });
    expect(again.output).toBe('yes /\r\n');
    expect(again.shell.restarted).toBeUndefined();
    c.close();
    await d.stop();
  });
});
