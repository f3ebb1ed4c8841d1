import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../../src/config/schema.js';
import { refusedAddress, refusedName } from '../../../src/netproxy/policy.js';

const policy = { allow: ['registry.npmjs.org', '*.github.com', '127.0.0.1', 'intranet.example'], deny: ['evil.github.com'] };

describe('which names a sandboxed job may reach', () => {
  it.each([
    ['registry.npmjs.org', undefined],
    ['REGISTRY.npmjs.org.', undefined],
    ['codeload.github.com', undefined],
    ['a.b.github.com', undefined],
    // *.domain is the names under it, not the domain itself.
    ['github.com', 'not in sandbox.network.allow'],
    ['npmjs.org', 'not in sandbox.network.allow'],
    ['registry.npmjs.org.evil.example', 'not in sandbox.network.allow'],
    ['evilgithub.com', 'not in sandbox.network.allow'],
    // deny wins over allow.
    ['evil.github.com', 'matches sandbox.network.deny ("evil.github.com")'],
  ])('%s', (host, why) => {
    expect(refusedName(host, policy)).toBe(why);
  });
});

describe('where a name may lead', () => {
  it.each([
    ['registry.npmjs.org', '104.16.1.35', undefined],
    ['registry.npmjs.org', '2606:4700::6810:123', undefined],
    // A public name that resolves inside: the host, its network, the cloud's metadata service.
    ['codeload.github.com', '127.0.0.1', 'loopback'],
    ['codeload.github.com', '10.1.2.3', 'private'],
    ['codeload.github.com', '192.168.1.1', 'private'],
    ['codeload.github.com', '172.20.0.1', 'private'],
    ['codeload.github.com', '169.254.169.254', 'metadata'],
    ['codeload.github.com', '::1', 'loopback'],
    ['codeload.github.com', 'fe80::1', 'link-local'],
    ['codeload.github.com', 'fd00::5', 'private'],
    ['codeload.github.com', '::ffff:127.0.0.1', 'loopback'],
    ['codeload.github.com', '0.0.0.0', 'loopback'],
    // Named: the host name exactly, or the address itself (then any name that leads there may reach it).
    ['intranet.example', '10.0.0.8', undefined],
    ['10.9.9.9', '10.9.9.9', undefined],
    ['anything.github.com', '10.9.9.9', undefined],
  ])('%s at %s', (host, address, kind) => {
    const why = refusedAddress(host, address, { ...policy, allow: [...policy.allow.filter((a) => a !== '127.0.0.1'), '10.9.9.9'] });
    if (kind === undefined) expect(why).toBeUndefined();
    else expect(why).toBe(`${host} resolves to ${address}, a loopback, private, link-local or metadata address; name it in sandbox.network.allow to reach it`);
  });
});

describe('sandbox.network in the config', () => {
  it('takes true, false, or {allow, deny?} of names, *.domains and addresses', () => {
    expect(ConfigSchema.parse({ sandbox: { network: { allow: ['Registry.NPMjs.org', '*.github.com', '10.0.0.1', '::1'] } } }).sandbox.network).toEqual({
      allow: ['registry.npmjs.org', '*.github.com', '10.0.0.1', '::1'],
      deny: [],
      credentials: [],
    });
    expect(ConfigSchema.parse({ scopes: { ci: { network: { allow: ['x.example'] } } } }).scopes.ci.network).toEqual({ allow: ['x.example'], deny: [], credentials: [] });
  });

  it.each([
    [{ allow: [] }, 'name at least one destination'],
    [{ allow: ['https://registry.npmjs.org'] }, 'without scheme, port or path'],
    [{ allow: ['registry.npmjs.org:443'] }, 'without scheme, port or path'],
    [{ allow: ['x.example'], extra: 1 }, 'extra'],
  ])('refuses %j naming the problem', (network, says) => {
    const r = ConfigSchema.safeParse({ sandbox: { network } });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error!.issues)).toContain(says);
  });
});
