import { describe, expect, it } from 'vitest';
import { ProcctlError } from '../../../src/base/errors.js';
import { buildEnv, checkEnvOverrides } from '../../../src/runner/env.js';

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

describe('buildEnv', () => {
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
    const env = buildEnv(base, undefined, {});
    expect(env).toEqual({ HOME: '/home/u', PATH: '/usr/bin:/bin', KEEP: 'base' });
  });

  it('does not change the daemon environment it is given', () => {
    const copy = { ...base };
    buildEnv(copy, { KEEP: 'over' }, { PROCCTL_SESSION_ID: 'x' });
    expect(copy).toEqual(base);
  });

  it('lays the caller\'s variables over the daemon\'s', () => {
    const env = buildEnv(base, { KEEP: 'over', NEW: 'n' }, {});
    expect(env.KEEP).toBe('over');
    expect(env.NEW).toBe('n');
    expect(env.HOME).toBe('/home/u');
  });

  it('lets the session\'s own variables win over the caller\'s', () => {
    const env = buildEnv(base, { PROCCTL_SESSION_ID: 'spoofed', PROCCTL_SOCKET: '/evil' }, {
      PROCCTL_SESSION_ID: 'real',
      PROCCTL_SOCKET: '/run/procctl.sock',
      PROCCTL_STOP_FILE: '/run/stop',
      PROCCTL_TMPDIR: '/tmp/s',
    });
    expect(env).toMatchObject({
      PROCCTL_SESSION_ID: 'real',
      PROCCTL_SOCKET: '/run/procctl.sock',
      PROCCTL_STOP_FILE: '/run/stop',
      PROCCTL_TMPDIR: '/tmp/s',
    });
  });
});
