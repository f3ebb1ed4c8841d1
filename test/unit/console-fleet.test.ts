import { describe, expect, it } from 'vitest';
import { envSuffix, parseHosts, singleHost } from '../../src/console/fleet.js';

describe("procctl ui --host … (the fleet view's hosts)", () => {
  it('names local and ssh hosts, by default or as given', () => {
    expect(parseHosts(['local', 'ssh://me@web1', 'ssh://me@127.0.0.1:2222', 'db=ssh://db.example.org', 'box=local'])).toEqual([
      { name: 'local' },
      { name: 'web1', ssh: 'ssh://me@web1' },
      { name: '127.0.0.1:2222', ssh: 'ssh://me@127.0.0.1:2222' },
      { name: 'db', ssh: 'ssh://db.example.org' },
      { name: 'box' },
    ]);
  });

  it('refuses a value that is neither, a name given twice, and a name with a slash', () => {
    expect(() => parseHosts(['web1'])).toThrow(/--host web1: .*ssh:\/\/.*"local"/);
    expect(() => parseHosts(['ssh://a@web1', 'ssh://b@web1'])).toThrow(/"web1" is given twice; name one of them with NAME=/);
    expect(() => parseHosts(['local', 'local'])).toThrow(/given twice/);
    expect(() => parseHosts(['a b=local'])).toThrow(/may hold letters, digits/);
  });

  it('the one daemon of a plain procctl ui is local, or the --host (or $PROCCTL_HOST) given', () => {
    expect(singleHost(undefined, {})).toEqual({ name: 'local' });
    expect(singleHost(undefined, { PROCCTL_HOST: 'ssh://me@far:22' })).toEqual({ name: 'far:22', ssh: 'ssh://me@far:22' });
  });

  it("a host's own credential variables carry its name in capitals", () => {
    expect(envSuffix('web-1.example')).toBe('WEB_1_EXAMPLE');
  });
});
