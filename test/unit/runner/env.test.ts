import { describe, expect, it } from 'vitest';
import { ProcctlError } from '../../../src/base/errors.js';
import { checkEnvOverrides, JobEnv } from '../../../src/runner/env.js';

function refusal(overrides: Record<string, string>): ProcctlError {
  try {
    checkEnvOverrides(overrides);
  } catch (err) {
    expect(err).toBeInstanceOf(ProcctlError);
    return err as ProcctlError;
  }
  throw new Error(`expected ${JSON.stringify(overrides)} to be refused`);
}

describe('checkEnvOverrides', () => {
  it('accepts ordinary variables', () => {
    expect(() => checkEnvOverrides({ FOO: '1', _x: '', lower_case: 'y', A1: 'z', NODE_ENV: 'test', PATHS: 'ok', MY_PATH: 'ok' })).not.toThrow();
    expect(() => checkEnvOverrides({})).not.toThrow();
  });

  it.each([
    ['PATH', 'PATH'],
    ['LD_PRELOAD', 'LD_'],
    ['LD_LIBRARY_PATH', 'LD_'],
    ['DYLD_INSERT_LIBRARIES', 'DYLD_'],
    ['BASH_FUNC_ls%%', 'BASH_FUNC_'],
    ['NODE_OPTIONS', 'NODE_OPTIONS'],
  ])('refuses %s as forbidden, naming it', (name, because) => {
    const e = refusal({ OK: '1', [name]: 'x' });
    expect(e.kind).toBe('forbidden');
    expect(e.message).toContain(name.replace('%%', ''));
    expect(e.message).toContain(because);
    expect(e.details).toEqual({ path: ['env', name] });
  });

  it('refuses BASH_FUNC_ names with a valid shape too', () => {
    const e = refusal({ BASH_FUNC_foo: '() { :; }' });
    expect(e.kind).toBe('forbidden');
    expect(e.message).toContain('BASH_FUNC_');
  });

  it.each(['1ABC', 'A-B', 'A B', 'A=B', '', 'é', 'FOO\n'])('refuses the invalid name %j as forbidden', (name) => {
    const e = refusal({ [name]: 'x' });
    expect(e.kind).toBe('forbidden');
    expect(e.message).toContain('not a valid variable name');
    expect(e.details).toEqual({ path: ['env', name] });
  });
});

describe('JobEnv', () => {
  const base = {
    HOME: '/home/u',
    PATH: '/usr/bin:/bin',
    NOTIFY_SOCKET: '/run/systemd/notify',
    LISTEN_FDS: '1',
    LISTEN_PID: '123',
    LISTEN_FDNAMES: 'procctl.sock',
    WATCHDOG_USEC: '1000',
    WATCHDOG_PID: '123',
    KEEP: 'base',
  };

  it('starts from the daemon environment without the daemon-only variables', () => {
    const env = JobEnv.of(base, undefined, {}).object();
    expect(env).toEqual({ HOME: '/home/u', PATH: '/usr/bin:/bin', KEEP: 'base' });
  });

  it('does not change the daemon environment it is given', () => {
    const copy = { ...base };
    JobEnv.of(copy, { KEEP: 'over' }, { PROCCTL_SESSION_ID: 'x' }).object();
    expect(copy).toEqual(base);
  });

  it('lays the caller\'s variables over the daemon\'s', () => {
    const env = JobEnv.of(base, { KEEP: 'over', NEW: 'n' }, {}).object();
    expect(env.KEEP).toBe('over');
    expect(env.NEW).toBe('n');
    expect(env.HOME).toBe('/home/u');
  });

  it('lets the session\'s own variables win over the caller\'s', () => {
    const env = JobEnv.of(base, { PROCCTL_SESSION_ID: 'spoofed', PROCCTL_SOCKET: '/evil' }, {
      PROCCTL_SESSION_ID: 'real',
      PROCCTL_SOCKET: '/run/procctl.sock',
      PROCCTL_STOP_FILE: '/run/stop',
      PROCCTL_TMPDIR: '/tmp/s',
    }).object();
    expect(env).toMatchObject({
      PROCCTL_SESSION_ID: 'real',
      PROCCTL_SOCKET: '/run/procctl.sock',
      PROCCTL_STOP_FILE: '/run/stop',
      PROCCTL_TMPDIR: '/tmp/s',
    });
  });

  it('gives the spawner each variable once, NAME=value, as the object has it, whichever of the three set it', () => {
    const cases: [Record<string, string> | undefined, Record<string, string>][] = [
      [undefined, { PROCCTL_SESSION_ID: 'x' }],
      [{ KEEP: 'over', NEW: 'n' }, { PROCCTL_SESSION_ID: 'x' }],
      [{ HOME: 'h', PROCCTL_SESSION_ID: 'spoofed' }, { PROCCTL_SESSION_ID: 'real', PATH: '/own' }],
      [{ constructor: 'c', toString: 't' }, {}],
    ];
    for (const [overrides, own] of cases) {
      const env = JobEnv.of(base, overrides, own);
      const pairs = env.pairs();
      const names = pairs.map((p) => p.slice(0, p.indexOf('=')));
      expect(new Set(names).size).toBe(names.length);
      expect(Object.fromEntries(pairs.map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]))).toEqual(env.object());
    }
  });

  it('makes the inherited part once: a second exec over the same inherited environment gets the same strings', () => {
    const a = JobEnv.of(base, undefined, { PROCCTL_SESSION_ID: 'a' }).pairs();
    const b = JobEnv.of(base, undefined, { PROCCTL_SESSION_ID: 'b' }).pairs();
    expect(a.slice(0, -1)).toEqual(b.slice(0, -1));
    expect(a.at(-1)).toBe('PROCCTL_SESSION_ID=a');
    expect(b.at(-1)).toBe('PROCCTL_SESSION_ID=b');
  });

  it('leaves out a variable holding a credential\'s value, unless the caller set it', () => {
    const env = JobEnv.of({ ...base, TOKEN_COPY: 'xx-secret-xx', OTHER: 'fine' }, { MINE: 'secret' }, { PROCCTL_SESSION_ID: 's' }).without(['secret'], { MINE: 'secret' });
    expect(env.object()).not.toHaveProperty('TOKEN_COPY');
    expect(env.object()).toMatchObject({ OTHER: 'fine', MINE: 'secret', PROCCTL_SESSION_ID: 's' });
    expect(env.pairs()).not.toContain('TOKEN_COPY=xx-secret-xx');
  });
});
