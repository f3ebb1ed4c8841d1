import { request, type ClientRequest } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { restartAndWait } from '../helpers/restart.js';
import { Scoped } from '../helpers/session.js';
import { cookieOf, startConsole, stopAllConsoles, type TestConsole } from './console.js';

/**
 * A page following a session's output through a planned restart (SPEC §19) is sent what the
 * session printed while the console's link to the daemon was down, once. The console is stopped
 * (SIGSTOP) across the restart, so the job prints while it has no connection, at any load.
 */

const pids = new Set<number>();
const streams = new Set<ClientRequest>();

afterEach(async () => {
  for (const s of streams) s.destroy();
  streams.clear();
  await stopAllConsoles();
  await stopAllDaemons();
  killLeftovers(pids);
});

/** A session view's stream of pushes (`/api/events?session=ID`), its output events as they come, and whether it was told it is live. */
function followSession(c: TestConsole, cookie: string, sessionId: string): { output: () => { data: string; offset: number }[]; following: () => boolean } {
  const got: { data: string; offset: number }[] = [];
  let following = false;
  let text = '';
  const req = request(`${c.origin}/api/events?${new URLSearchParams({ session: sessionId })}`, { headers: { cookie } }, (res) => {
    res.setEncoding('utf8');
    res.on('data', (s: string) => {
      text += s;
      for (let end = text.indexOf('\n\n'); end !== -1; end = text.indexOf('\n\n')) {
        const block = text.slice(0, end);
        text = text.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event === 'output' && data) got.push(JSON.parse(data));
        if (event === 'following') following = true;
      }
    });
  });
  req.on('error', () => undefined);
  req.end();
  streams.add(req);
  return { output: () => got, following: () => following };
}

/** A daemon, its console and a person's cookie, and a `cat` in the background that prints what it is written. */
async function catBehindConsole() {
  const d = await startDaemon();
  const ui = await startConsole(d);
  const cookie = await cookieOf(ui);
  const s = new Scoped(await d.client(), 'agent');
  const job = await s.exec({ command: 'cat', background: true });
  pids.add(job.pid);
  return { d, ui, cookie, s, job };
}

describe("a session's page", () => {
  it('is told once its stream is live (it reads the log then), and what the job prints after that reaches it', async () => {
    const { ui, cookie, s, job } = await catBehindConsole();
    // No page was open: the console subscribes for this one, and says so once it has.
    const page = followSession(ui, cookie, job.sessionId);
    await waitFor(() => page.following(), { what: 'the console to say the stream is live' });
    await s.process({ action: 'write', sessionId: job.sessionId, data: 'first-line\n' });
    await waitFor(() => page.output().some((c) => c.data.includes('first-line')), { what: 'the line printed after, on the stream' });
    await s.process({ action: 'kill', sessionId: job.sessionId });
    s.c.close();
  });
});

describe('the console across a planned restart', () => {
  it("sends a session's page what it printed while the link was down, each character once", async () => {
    const { d, ui, cookie, s, job } = await catBehindConsole();
    const id = job.sessionId;
    const say = (on: Scoped, data: string) => on.process({ action: 'write', sessionId: id, data });
    await say(s, 'before-the-page\n');
    const page = followSession(ui, cookie, id);
    const shown = () => page.output().map((c) => c.data).join('');
    // The page is followed once what is printed now reaches it: a line now and then until one does.
    let n = 0;
    await waitFor(async () => shown() !== '' || (await say(s, `ping-${++n}\n`), false), { what: 'the page to be sent output', timeoutMs: 60_000, everyMs: 500 });
    await waitFor(() => shown().endsWith(`ping-${n}\n`), { what: 'the last ping on the page' });
    const before = shown();
    s.c.close();
    process.kill(ui.proc.pid!, 'SIGSTOP');
    try {
      await restartAndWait(d);
      const s2 = new Scoped(await d.client(), 'agent');
      await say(s2, 'while-away\n');
      await s2.waitOutput(id, 'while-away');
      s2.c.close();
    } finally {
      process.kill(ui.proc.pid!, 'SIGCONT');
    }
    await waitFor(() => shown().includes('while-away\n'), { what: 'the output printed while the console was away', timeoutMs: 60_000 });
    const s3 = new Scoped(await d.client(), 'agent');
    await say(s3, 'back\n');
    await waitFor(() => shown().includes('back\n'), { what: 'the output printed after', timeoutMs: 60_000 });
    s3.c.close();
    expect(shown()).toBe(`${before}while-away\nback\n`);
    // Each chunk where the session's whole output has it, one after the other.
    let at = page.output()[0].offset;
    for (const c of page.output()) {
      expect(c.offset).toBe(at);
      at += c.data.length;
    }
  }, 180_000);
});
