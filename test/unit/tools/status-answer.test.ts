import { describe, expect, it } from 'vitest';
import { ConfigSchema, type Config } from '../../../src/config/schema.js';
import { Registry } from '../../../src/session/registry.js';
import type { Daemon } from '../../../src/tools/context.js';
import { daemonStatus } from '../../../src/tools/status.js';
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
});
