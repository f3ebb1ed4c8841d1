import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { DEFAULT_EXCLUDE, globToRegExp, inheritedEnv } from '../../../src/policy/env.js';

describe('globToRegExp', () => {
  it.each([
    ['*KEY*', 'MY_API_KEY', true],
    ['*KEY*', 'keychain_path', true],
    ['*KEY*', 'KE_Y', false],
    ['SSLKEYLOGFILE', 'sslkeylogfile', true],
    ['SSLKEYLOGFILE', 'SSLKEYLOGFILE_2', false],
    ['AWS_?', 'AWS_X', true],
    ['AWS_?', 'AWS_XY', false],
  ])('%s against %s: %s', (glob, name, matches) => {
    expect(globToRegExp(glob).test(name)).toBe(matches);
  });
});

describe('inheritedEnv', () => {
  const base = { PATH: '/bin', HOME: '/root', GITHUB_TOKEN: 'g', db_password: 'p', OPENAI_API_KEY: 'k', SSLKEYLOGFILE: '/tmp/k', AWS_SECRET_ACCESS_KEY: 's', GOOGLE_APPLICATION_CREDENTIALS: '/c' };

  it('withholds what the default list names, case-insensitively, and counts it', () => {
    const { env, withheld } = inheritedEnv(base, { exclude: DEFAULT_EXCLUDE, include: [] });
    expect(env).toEqual({ PATH: '/bin', HOME: '/root' });
    expect(withheld).toBe(6);
  });

  it('keeps what include names even when excluded', () => {
    const { env, withheld } = inheritedEnv(base, { exclude: DEFAULT_EXCLUDE, include: ['GITHUB_*', 'ssl*'] });
    expect(env).toEqual({ PATH: '/bin', HOME: '/root', GITHUB_TOKEN: 'g', SSLKEYLOGFILE: '/tmp/k' });
    expect(withheld).toBe(4);
  });

  it('an empty exclude list keeps everything', () => {
    expect(inheritedEnv(base, { exclude: [], include: [] })).toEqual({ env: base, withheld: 0 });
  });
});

describe('env config', () => {
  it('defaults to the list of SPEC §8', () => {
    expect(parseConfig({}).env).toEqual({
      exclude: [
        '*KEY*', '*SECRET*', '*TOKEN*', '*PASS*', '*_PWD', '*CREDENTIAL*', '*AUTH*', '*DSN*', '*COOKIE*', '*SESSION*', '*JWT*', '*PRIVATE*',
        '*WEBHOOK*', '*CONNECTION_STRING*', 'SSH_AUTH_SOCK', 'GPG_AGENT_INFO', 'KUBECONFIG', 'DOCKER_AUTH_CONFIG', 'NETRC', 'SSLKEYLOGFILE',
      ],
      include: [],
      inherit: 'all',
    });
  });

  it('refuses a pattern that is not a variable-name glob, naming the key', () => {
    expect(() => parseConfig({ env: { include: ['FOO BAR'] } })).toThrow(/invalid config env\.include\.0 = "FOO BAR".*variable-name glob/);
  });
});
