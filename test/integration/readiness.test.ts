import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliOn } from '../cli/run.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { sharedDaemon, type Scoped, type Scopes } from '../helpers/session.js';
import { freePort } from '../helpers/net.js';

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;
const clients: TestClient[] = [];
const dir = mkdtempSync(join(tmpdir(), 'procctl-ready-'));

sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000' } }, (x) => ({ d, c, scopes } = x));
afterAll(() => {
  for (const x of clients) x.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A fresh connection subscribed to its scope's events. */
async function listening(prefix: string): Promise<Scoped> {
  const client = await d.client();
  clients.push(client);
  const s = scopes.next(prefix, client);
  expect((await s.request('subscribe', {})).error).toBeUndefined();
  return s;
}

const eventsOf = (s: Scoped, sessionId: string) =>
  s.c.notifications.filter((n) => n.method === 'event' && n.params.sessionId === sessionId).map((n) => n.params);


/** A node one-liner that listens on PORT after DELAY ms and serves 200 on /ok, 503 elsewhere. */
const server = (port: number, delayMs: number) =>
  `exec node -e "setTimeout(() => require('http').createServer((q, s) => { s.statusCode = q.url === '/ok' ? 200 : 503; s.end('hi'); }).listen(${port}, '127.0.0.1', () => console.log('listening')), ${delayMs})"`;

describe('exec waitFor (SPEC §5)', () => {
  it('port: answers running with ready: true once the port accepts, not before; a ready event is sent', async () => {
    const s = await listening('ready-port');
    const port = await freePort();
    const t0 = Date.now();
    const r = await s.exec({ command: server(port, 600), waitFor: { port }, yieldMs: 60_000 });
    scopes.track(r.pid);
    expect(r.status).toBe('running');
    expect(r.ready).toBe(true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(550);
    // Under a loaded machine the wait may pass a second, said in seconds: either is the same sentence.
    expect(r.text).toMatch(new RegExp(`^Ready: port ${port} answers \\((\\d+ ms|\\d+(\\.\\d)? s) after it started\\)`));
    await s.c.until(() => eventsOf(s, r.sessionId).some((e) => e.type === 'ready'));
    expect(eventsOf(s, r.sessionId).find((e) => e.type === 'ready')).toMatchObject({ waitFor: `port ${port} answers` });
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('output: a line matching the RE2 pattern, on either stream', async () => {
    const s = scopes.next('ready-output');
    const r = await s.exec({ command: 'sleep 0.3; echo "compiling"; echo "server ready on 4000" >&2; sleep 60', waitFor: { output: 'ready on \\d+' }, yieldMs: 60_000 });
    scopes.track(r.pid);
    expect(r).toMatchObject({ status: 'running', ready: true });
    expect(r.tail).toContain('server ready on 4000');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('http: the GET must answer 2xx/3xx (or the status asked for)', async () => {
    const s = scopes.next('ready-http');
    const port = await freePort();
    const notYet = await s.exec({ command: server(port, 0), waitFor: { http: `http://127.0.0.1:${port}/not-ok` }, yieldMs: 800 });
    scopes.track(notYet.pid);
    // It listens, but answers 503 there: never ready within the yield.
    expect(notYet).toMatchObject({ status: 'running', ready: false });
    expect(notYet.text).toMatch(new RegExp(`^Not ready yet: GET http://127.0.0.1:${port}/not-ok answers 2xx or 3xx was not seen in `));
    await s.process({ action: 'kill', sessionId: notYet.sessionId });
    const port2 = await freePort();
    const ok = await s.exec({ command: server(port2, 300), waitFor: { http: `http://127.0.0.1:${port2}/ok` }, yieldMs: 60_000 });
    scopes.track(ok.pid);
    expect(ok).toMatchObject({ status: 'running', ready: true });
    await s.process({ action: 'kill', sessionId: ok.sessionId });
    const port3 = await freePort();
    const asked = await s.exec({ command: server(port3, 0), waitFor: { http: `http://127.0.0.1:${port3}/x`, status: 503 }, yieldMs: 60_000 });
    scopes.track(asked.pid);
    expect(asked.ready).toBe(true);
    await s.process({ action: 'kill', sessionId: asked.sessionId });
  });

  it('file: relative to workdir', async () => {
    const s = scopes.next('ready-file');
    const r = await s.exec({ command: 'sleep 0.3; touch made.flag; sleep 60', workdir: dir, waitFor: { file: 'made.flag' }, yieldMs: 60_000 });
    scopes.track(r.pid);
    expect(r).toMatchObject({ status: 'running', ready: true });
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('the command ends first: answered as usual, ready: false and said; probing stops with it', async () => {
    const s = scopes.next('ready-ends');
    const port = await freePort();
    const r = await s.exec({ command: 'echo "bad config"; exit 3', waitFor: { port }, yieldMs: 60_000 });
    expect(r).toMatchObject({ status: 'completed', exitCode: 3, ready: false });
    expect(r.text).toContain(`(It ended before port ${port} answers.)`);
    // Nothing else here waits for readiness now: the probe is gone with its session.
    const probing = async () => (await c.call('daemon.diagnostics', { objects: false })).readinessProbes;
    await waitFor(async () => (await probing()) === 0, { what: 'the probe to stop with the session' });
    expect(await probing()).toBe(0);
  });

  it('it asks a question first: answered as waiting_input, as without waitFor', async () => {
    const s = scopes.next('ready-asks');
    const port = await freePort();
    const r = await s.exec({ command: 'printf "Continue? [y/N] "; read a; sleep 60', waitFor: { port }, yieldMs: 60_000 });
    scopes.track(r.pid);
    expect(r.status).toBe('waiting_input');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('bad waitFor: a pattern RE2 cannot compile, two kinds at once, a URL that is not http', async () => {
    const s = scopes.next('ready-bad');
    const re = await s.error('exec', { command: 'true', waitFor: { output: '(?<=x)y' } });
    expect(re.data.kind).toBe('invalid');
    expect(re.message).toMatch(/waitFor\.output is not a valid RE2 pattern: .*; RE2 has no lookaround or backreferences/);
    expect((await s.error('exec', { command: 'true', waitFor: { port: 80, output: 'x' } })).data.kind).toBe('invalid');
    expect((await s.error('exec', { command: 'true', waitFor: { http: 'ftp://example.org/' } })).data.kind).toBe('invalid');
    expect((await s.error('exec', { command: 'true', notify: { match: '(a' } })).message).toContain('notify.match is not a valid RE2 pattern');
  });

  it('procctl exec --wait-port / --wait-output: exit 0 once ready (it runs on), the command\'s status when it ends first, 4 when the yield passes', async () => {
    const on = cliOn(d.socket);
    const s = scopes.next('ready-cli');
    const run = (args: string[]) => on(['--scope', s.scope, ...args]);
    const port = await freePort();
    const ready = await run(['exec', '--wait-port', String(port), '--', server(port, 200)]);
    expect(ready.code, ready.stderr).toBe(0);
    expect(ready.stderr).toContain(`procctl: ready: port ${port} answers`);
    const id = /Session (\w+) is still running/.exec(ready.stdout)?.[1];
    expect(id, ready.stdout).toBeDefined();
    await s.process({ action: 'kill', sessionId: id });
    const ended = await run(['exec', '--wait-output', 'never printed', '--', 'echo nope; exit 5']);
    expect(ended.code).toBe(5);
    expect(ended.stdout).toContain('nope');
    const slow = await run(['exec', '--wait-output', 'never printed', '--yield', '300', '--', 'sleep 60']);
    expect(slow.code).toBe(4);
    expect(slow.stderr).toContain('procctl: not ready yet: a line of output matches /never printed/');
    const slowId = /Session (\w+) is still running/.exec(slow.stdout)?.[1];
    await s.process({ action: 'kill', sessionId: slowId });
    // --notify reaches the daemon: a word as itself, anything else as the pattern of {match}.
    const never = await run(['--json', 'exec', '--bg', '--notify', 'never', '--', 'true']);
    expect(never.code, never.stderr).toBe(0);
    const badMatch = await run(['exec', '--bg', '--notify', '(unclosed', '--', 'true']);
    expect(badMatch.code).not.toBe(0);
    expect(badMatch.stderr).toContain('notify.match is not a valid RE2 pattern');
    const two = await run(['exec', '--wait-port', '1', '--wait-file', 'x', '--', 'true']);
    expect(two.code).toBe(2);
    expect(two.stderr).toContain('give one of --wait-port, --wait-output, --wait-http and --wait-file');
  });
});

describe('exec notify (SPEC §5)', () => {
  const exitedOf = async (s: Scoped, id: string) => {
    await s.c.until(() => eventsOf(s, id).some((e) => e.type === 'exited'));
    return eventsOf(s, id).find((e) => e.type === 'exited');
  };

  it('"failure": a backgrounded success is no notification (no summary), a failure is; "never": none; the exited event itself always comes', async () => {
    const s = await listening('notify');
    const ok = await s.exec({ command: 'echo fine', background: true, notify: 'failure' });
    const bad = await s.exec({ command: 'echo broken; exit 2', background: true, notify: 'failure' });
    const quiet = await s.exec({ command: 'echo broken; exit 2', background: true, notify: 'never' });
    const plain = await s.exec({ command: 'echo fine', background: true });
    expect((await exitedOf(s, ok.sessionId)).summary).toBeUndefined();
    expect((await exitedOf(s, bad.sessionId)).summary).toBe(`Exec completed (${bad.sessionId}, code 2) :: broken`);
    expect((await exitedOf(s, quiet.sessionId)).summary).toBeUndefined();
    expect((await exitedOf(s, plain.sessionId)).summary).toBe(`Exec completed (${plain.sessionId}, code 0) :: fine`);
  });

  it('{match}: an output_match event per matching line, rate-limited (a burst of 20), the rest counted', async () => {
    const s = await listening('notify-match');
    const r = await s.exec({ command: 'for i in $(seq 1 100); do echo "ERROR $i"; echo "ok $i"; done', background: true, notify: { match: '^ERROR \\d+$' } });
    const exited = await exitedOf(s, r.sessionId);
    const matches = eventsOf(s, r.sessionId).filter((e) => e.type === 'output_match');
    expect(matches.length).toBeGreaterThanOrEqual(20);
    expect(matches.length).toBeLessThan(100);
    expect(matches[0]).toMatchObject({ line: 'ERROR 1', stream: 'stdout' });
    expect(matches.every((m) => /^ERROR \d+$/.test(m.line))).toBe(true);
    expect(exited.matches).toEqual({ sent: matches.length, dropped: 100 - matches.length });
    expect(exited.summary).toContain('ok 100');
  });
});
