import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { cookieOf, http, startConsole, stopAllConsoles, type TestConsole } from './console.js';

/**
 * The console is safe to leave running (SPEC §17, issue 28 point 3): each test plays the attacker
 * next to the person, whose same request works.
 */

let d: TestDaemon;
let c: TestClient;
let ui: TestConsole;

beforeAll(async () => {
  d = await startDaemon({ env: { PROCCTL_INTERRUPT: 'false' } });
  c = await d.client();
  ui = await startConsole(d);
});

afterAll(async () => {
  c?.close();
  await stopAllConsoles();
  await stopAllDaemons();
});

/** A running session of scope "agent", to act on. */
async function sleeper(): Promise<string> {
  const r = await c.exec({ command: 'sleep 600', background: true, scope: 'agent' });
  return r.sessionId;
}

async function statusOf(id: string): Promise<string> {
  const r = await c.process({ action: 'list', scope: '*', ...asPerson(d) });
  return r.sessions.find((s: any) => s.sessionId === id)?.status;
}

describe('the one-time token', () => {
  it('prints exactly one line, the link, and never the token on stderr', async () => {
    expect(ui.stdout()).toBe(`${ui.url}\n`);
    expect(ui.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{40,}$/);
    expect(ui.stderr()).not.toContain(ui.token);
  });

  it('is traded once for an HttpOnly SameSite=Strict cookie; a second use is refused, the cookie goes on working', async () => {
    const first = await http(ui.url);
    expect(first.status).toBe(303);
    expect(first.headers.location).toBe('/');
    const setCookie = String((first.headers['set-cookie'] as string[])[0]);
    expect(setCookie).toMatch(/; HttpOnly/);
    expect(setCookie).toMatch(/; SameSite=Strict/);
    expect(setCookie).not.toMatch(/Max-Age|Expires/i);
    const cookie = setCookie.split(';')[0];
    // The attacker who saw the link afterwards (a history, a screen) gets nothing.
    const again = await http(ui.url);
    expect(again.status).toBe(403);
    expect(again.headers['set-cookie']).toBeUndefined();
    // The person's browser, with its cookie, has the page.
    const page = await http(`${ui.origin}/`, { headers: { cookie } });
    expect(page.status).toBe(200);
    expect(page.body).toContain('<script type="module" src="/app.js">');
    expect(ui.stderr()).not.toContain(ui.token);
  });

  it('refuses the page and every API call without the cookie, or with one the console never gave', async () => {
    for (const cookie of [undefined, `procctl_console_${ui.port}=forged`]) {
      const headers: Record<string, string> = cookie ? { cookie } : {};
      expect((await http(`${ui.origin}/`, { headers })).status).toBe(401);
      expect((await http(`${ui.origin}/api/session`, { headers })).status).toBe(401);
      expect((await http(`${ui.origin}/api/events`, { headers })).status).toBe(401);
      expect((await http(`${ui.origin}/api/read?action=log&sessionId=x`, { headers })).status).toBe(401);
    }
  });
});

describe('requests to another name (DNS rebinding)', () => {
  it('are refused with 421 whatever they carry; the console\'s own names are answered', async () => {
    const fresh = await startConsole(d);
    try {
      const rebound = await http(fresh.url, { headers: { host: `attacker.example:${fresh.port}` } });
      expect(rebound.status).toBe(421);
      // The token was not spent by the refused request: the person's own trade still works.
      const cookie = await cookieOf(fresh);
      for (const host of [`attacker.example:${fresh.port}`, `127.0.0.1:${fresh.port + 1}`, 'localhost']) {
        expect((await http(`${fresh.origin}/api/session`, { headers: { host, cookie } })).status, host).toBe(421);
      }
      expect((await http(`${fresh.origin}/api/session`, { headers: { host: `localhost:${fresh.port}`, cookie } })).status).toBe(200);
    } finally {
      await fresh.stop();
    }
  });
});

describe('state-changing requests', () => {
  it("need the console's Origin, the cookie and the session's CSRF token; with all three the action happens", async () => {
    const cookie = await cookieOf(await startConsole(d).then((x) => (ui2 = x)));
    const { csrf } = JSON.parse((await http(`${ui2.origin}/api/session`, { headers: { cookie } })).body);
    expect(csrf).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    const id = await sleeper();
    const body = JSON.stringify({ action: 'kill', sessionId: id });
    const json = { 'content-type': 'application/json' };
    const tries: [string, Record<string, string>, number][] = [
      ['no Origin', { ...json, cookie, 'x-csrf-token': csrf }, 403],
      ['another origin', { ...json, cookie, 'x-csrf-token': csrf, origin: 'http://attacker.example' }, 403],
      ['another port of loopback', { ...json, cookie, 'x-csrf-token': csrf, origin: `http://127.0.0.1:${ui2.port + 1}` }, 403],
      ['no cookie', { ...json, 'x-csrf-token': csrf, origin: ui2.origin }, 401],
      ['no CSRF token', { ...json, cookie, origin: ui2.origin }, 403],
      ['a wrong CSRF token', { ...json, cookie, origin: ui2.origin, 'x-csrf-token': 'x'.repeat(43) }, 403],
      ['a form post', { 'content-type': 'application/x-www-form-urlencoded', cookie, origin: ui2.origin, 'x-csrf-token': csrf }, 415],
    ];
    for (const [what, headers, status] of tries) {
      const r = await http(`${ui2.origin}/api/act`, { method: 'POST', headers, body });
      expect(r.status, what).toBe(status);
    }
    expect(await statusOf(id)).toBe('running');
    // The person's page sends all three.
    const ok = await http(`${ui2.origin}/api/act`, { method: 'POST', headers: { ...json, cookie, origin: ui2.origin, 'x-csrf-token': csrf }, body });
    expect(ok.status, ok.body).toBe(200);
    expect(JSON.parse(ok.body)).toMatchObject({ sessionId: id, status: 'failed', reason: 'user' });
  });

  it('cannot name a scope or a credential of their own, nor an action the page does not offer', async () => {
    const cookie = await cookieOf(await startConsole(d).then((x) => (ui2 = x)));
    const { csrf } = JSON.parse((await http(`${ui2.origin}/api/session`, { headers: { cookie } })).body);
    const headers = { 'content-type': 'application/json', cookie, origin: ui2.origin, 'x-csrf-token': csrf };
    const r = await http(`${ui2.origin}/api/act`, { method: 'POST', headers, body: JSON.stringify({ action: 'clear', sessionId: 'x' }) });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error).toMatch(/action must be one of/);
    // History is read as the console's operator: a scope or a credential in the query is not passed on
    // (a wrong token passed on would be refused by the daemon; the page's own history still answers).
    const h = await http(`${ui2.origin}/api/history?scope=agent&token=${'x'.repeat(20)}&approverToken=y`, { headers: { cookie } });
    expect(h.status, h.body).toBe(200);
    expect(Array.isArray(JSON.parse(h.body).sessions)).toBe(true);
  });
});

let ui2: TestConsole;

describe('what the console serves', () => {
  it('has a Content-Security-Policy without inline script on every answer, and ships no third-party origin', async () => {
    const cookie = await cookieOf(await startConsole(d).then((x) => (ui2 = x)));
    for (const path of ['/', '/app.js', '/app.css', '/api/session', '/nothing']) {
      const r = await http(`${ui2.origin}${path}`, { headers: { cookie } });
      const csp = String(r.headers['content-security-policy']);
      expect(csp, path).toMatch(/default-src 'self'/);
      const script = /script-src ([^;]*)/.exec(csp)?.[1] ?? '';
      expect(script, path).toBe("'self'");
      expect(r.headers['x-frame-options'], path).toBe('DENY');
    }
    const page = await http(`${ui2.origin}/`, { headers: { cookie } });
    expect(page.body).not.toMatch(/<script>|<script [^>]*>[^<]/);
    expect(page.body).not.toMatch(/https?:\/\//);
  });
});

describe('a job on this host', () => {
  it('cannot act through the console without the cookie, even reaching it over loopback', async () => {
    const id = await sleeper();
    const ui3 = await startConsole(d);
    // The job knows the console's address and even its Origin; it has no cookie and no CSRF token.
    const post = `curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' -H 'Origin: ${ui3.origin}' --data '{"action":"kill","sessionId":"${id}"}' ${ui3.origin}/api/act`;
    const get = `curl -s -o /dev/null -w '%{http_code}' ${ui3.origin}/api/events`;
    const history = `curl -s -o /dev/null -w '%{http_code}' '${ui3.origin}/api/history?ofScope=agent'`;
    const r = await c.exec({ command: `${post}; echo; ${get}; echo; ${history}`, scope: 'agent', yieldMs: 20_000 });
    expect(r.output.trim().split('\n')).toEqual(['401', '401', '401']);
    expect(await statusOf(id)).toBe('running');
    await waitFor(async () => (await c.process({ action: 'kill', sessionId: id, scope: 'agent' })).status === 'failed');
    await ui3.stop();
  });
});
