import { describe, expect, it, vi } from 'vitest';
import { ConfigSchema, type Config } from '../../../src/config/schema.js';
import { Registry } from '../../../src/session/registry.js';
import type { Daemon } from '../../../src/tools/context.js';
import { daemonStatus, daemonStatusAnswer, saysSame } from '../../../src/tools/status.js';
import type { JsonText } from '../../../src/tools/json-text.js';
import { makeSession } from '../session/make-session.js';

/** A daemon with what daemon.status reads: no sessions, no cgroups, review known or still probing. */
function daemonWith(config: Config, review: () => unknown) {
  const d = {
    registry: new Registry(),
    config: () => d.current,
    current: config,
    reviewSupport: review,
    cgroups: { mode: 'none', reason: 'test', v1: {}, controllers: [], freeze: false },
    socketPath: '/tmp/status-answer.sock',
    closing: false,
    state: { dir: '/tmp/state', status: () => ({ writable: true }) },
    configStatus: () => ({ file: null }),
    trail: { status: () => ({ enabled: false }) },
    telemetryStatus: () => ({ endpoint: null }),
    restarts: { planned: 0, crash: 0, lastAt: null, lastMs: null, adopted: 0, lost: 0 },
  };
  return d as typeof d & Daemon;
}

const isPromise = (x: unknown): x is Promise<unknown> => x instanceof Promise;

// Some clients ask daemon.status after every poll: an answer that is a promise is a request held in
// flight (the connection's map of them, a long-lived table made anew every few requests).
describe('daemon.status', () => {
  it('answers at once once nothing it says is waited for, and says a new config the first time it is asked after the change', async () => {
    const d = daemonWith(ConfigSchema.parse({}), () => ({ review: false, reason: 'not here' }));
    // The first ask checks the sandbox (off the loop): it waits for that.
    const first = daemonStatus(d, 0, 'test');
    expect(isPromise(first)).toBe(true);
    const firstAnswer = await first;
    const second = daemonStatus(d, 0, 'test');
    expect(isPromise(second), 'known by now: answered at once').toBe(false);
    expect({ ...(second as typeof firstAnswer), uptimeMs: 0 }).toEqual({ ...firstAnswer, uptimeMs: 0 });
    expect((second as typeof firstAnswer).changes).toEqual({ review: false, reason: 'not here' });

    // A reload: a new config object, its credentials named in the first answer after it.
    d.current = ConfigSchema.parse({ scopes: { fetcher: { network: { allow: ['127.0.0.2'], credentials: [{ name: 'API', hosts: ['127.0.0.1'], value: 'secret-value-9a' }] } } } });
    const reloaded = await daemonStatus(d, 0, 'test');
    expect(reloaded.sandbox.credentials?.map((c) => c.name)).toEqual(['API']);
    expect(JSON.stringify(reloaded)).not.toContain('secret-value-9a');
    const again = daemonStatus(d, 0, 'test');
    expect(isPromise(again)).toBe(false);
    expect((again as typeof reloaded).sandbox).toEqual(reloaded.sandbox);
  });

  it("walks the sessions by the registry's forEach, never its iterator, and only once nothing changed since the last walk", async () => {
    const d = daemonWith(ConfigSchema.parse({}), () => ({ review: false, reason: 'not here' }));
    // With cgroups, what the running sessions use is summed (none run here: the walk is what is looked at).
    d.cgroups.mode = 'v2';
    let iterated = 0;
    let walked = 0;
    const { all, forEach } = d.registry;
    d.registry.all = () => (iterated++, all.call(d.registry));
    d.registry.forEach = (visit) => (walked++, forEach.call(d.registry, visit));
    await daemonStatus(d, 0, 'test');
    // Walked to hold every running session's sample, then to add them up.
    const once = walked;
    expect({ iterated, walked: once > 0 }).toEqual({ iterated: 0, walked: true });
    // Asked again with no session come, gone, started or stopped: the totals made last, no walk.
    for (let i = 0; i < 3; i++) expect((daemonStatus(d, 0, 'test') as { sessions: unknown }).sessions).toBeDefined();
    expect(walked).toBe(once);
    // The registry changed (a session came): walked again, and only the first time.
    d.registry.add(makeSession('s1', 'default'));
    daemonStatus(d, 0, 'test');
    daemonStatus(d, 0, 'test');
    expect({ iterated, walked }).toEqual({ iterated: 0, walked: 2 * once });
  });

  it('waits while the review probe runs', async () => {
    let probed: (v: unknown) => void = () => undefined;
    let review: unknown = { review: false, reason: 'not yet' };
    const d = daemonWith(ConfigSchema.parse({}), () => review);
    await daemonStatus(d, 0, 'test');
    expect(isPromise(daemonStatus(d, 0, 'test'))).toBe(false);
    // Probed again (the state directory refused its directory the last time): the answer waits for it.
    review = new Promise((resolve) => (probed = resolve));
    const asked = daemonStatus(d, 0, 'test');
    expect(isPromise(asked)).toBe(true);
    probed({ review: true, how: 'test' });
    expect((await asked).changes).toEqual({ review: true, how: 'test' });
  });

  it('answers the kept JSON with the uptime written in while nothing else moved, and serializes anew when anything did', async () => {
    const d = daemonWith(ConfigSchema.parse({}), () => ({ review: false, reason: 'not here' }));
    let writable: boolean | undefined = true;
    d.state.status = () => ({ writable, ...(writable ? {} : { reason: 'EACCES' }) });
    const answer = async (startedAt: number) => (await daemonStatusAnswer(d, startedAt, 'test')) as JsonText;
    const asJson = async (startedAt: number) => JSON.parse(JSON.stringify(await daemonStatus(d, startedAt, 'test')));
    const now = Date.now();
    const first = await answer(now - 5000);
    expect(first.value).toMatchObject({ version: 'test', state: { writable: true } });
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      // Only the uptime moved: the kept JSON, not serialized again, with the uptime of this ask.
      const later = await answer(now - 9_876_543);
      expect(stringify).not.toHaveBeenCalled();
      const value = later.value as { uptimeMs: number };
      expect(value.uptimeMs).toBeGreaterThanOrEqual(9_876_543);
      expect(value).toEqual({ ...(await asJson(now - 9_876_543)), uptimeMs: value.uptimeMs });
      // A section changed (the state directory refuses writes): said at once, and kept from then on.
      stringify.mockClear();
      writable = false;
      const refused = (await answer(now)).value as { state: unknown };
      expect(refused.state).toEqual({ dir: '/tmp/state', writable: false, reason: 'EACCES' });
      expect(stringify).toHaveBeenCalled();
      stringify.mockClear();
      expect(((await answer(now)).value as { state: unknown }).state).toEqual(refused.state);
      expect(stringify).not.toHaveBeenCalled();
      // And back: a key gone is a change too.
      writable = true;
      expect(((await answer(now)).value as { state: unknown }).state).toEqual({ dir: '/tmp/state', writable: true });
    } finally {
      stringify.mockRestore();
    }
  });

  it('compares a value with the JSON it was read from as JSON would say it', () => {
    const said = JSON.parse(JSON.stringify({ a: 1, b: [1, { c: 'x' }], d: null, e: { f: true } }));
    expect(saysSame(said, { a: 1, b: [1, { c: 'x' }], d: null, e: { f: true } })).toBe(true);
    // Left out by JSON: the same.
    expect(saysSame(said, { a: 1, b: [1, { c: 'x' }], d: null, e: { f: true }, g: undefined })).toBe(true);
    // Key order is not part of a JSON object's value.
    expect(saysSame(said, { e: { f: true }, d: null, b: [1, { c: 'x' }], a: 1 })).toBe(true);
    for (const other of [
      { a: 2, b: [1, { c: 'x' }], d: null, e: { f: true } },
      { a: 1, b: [1, { c: 'y' }], d: null, e: { f: true } },
      { a: 1, b: [1], d: null, e: { f: true } },
      { a: 1, b: [1, { c: 'x' }], d: null, e: { f: true }, g: 0 },
      { a: 1, b: [1, { c: 'x' }], e: { f: true } },
      { a: 1, b: [1, { c: 'x' }], d: {}, e: { f: true } },
      { a: 1, b: { 0: 1, 1: { c: 'x' } }, d: null, e: { f: true } },
    ])
      expect(saysSame(said, other), JSON.stringify(other)).toBe(false);
    // What JSON would write otherwise than it reads: never taken as the same.
    expect(saysSame(JSON.parse(JSON.stringify({ t: new Date(0) })), { t: new Date(0) })).toBe(false);
    expect(saysSame(JSON.parse(JSON.stringify({ n: NaN })), { n: NaN })).toBe(false);
    // The top-level key left aside is left aside only there.
    expect(saysSame({ u: 1, k: { u: 1 } }, { u: 2, k: { u: 1 } }, 'u')).toBe(true);
    expect(saysSame({ u: 1, k: { u: 1 } }, { u: 1, k: { u: 2 } }, 'u')).toBe(false);
  });
});
