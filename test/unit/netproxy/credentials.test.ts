import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { Scrubber } from '../../../src/base/scrub.js';
import { ConfigSchema } from '../../../src/config/schema.js';
import { ProxyCa } from '../../../src/netproxy/ca.js';
import { carriedCredentials, credentialProblem, credentialSummary, sessionCredentials, credentialsOf } from '../../../src/sandbox/credentials.js';

const dir = mkdtempSync(join(tmpdir(), 'procctl-cred-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const parse = (network: unknown, scopes: unknown = {}) => ConfigSchema.safeParse({ sandbox: { mode: 'read-only', network }, scopes });

describe('sandbox.network.credentials (SPEC §21)', () => {
  it('takes exactly one value source, a name fit for a variable, and names the problem', () => {
    const two = parse({ credentials: [{ name: 'GH', hosts: ['api.github.com'], value: 'Bearer x', valueEnv: 'GH_TOKEN' }] });
    expect(two.success).toBe(false);
    expect(JSON.stringify(two.error?.issues)).toContain('exactly one of value');
    const none = parse({ credentials: [{ name: 'GH', hosts: ['api.github.com'] }] });
    expect(JSON.stringify(none.error?.issues)).toContain('exactly one of value');
    const badName = parse({ credentials: [{ name: 'my-token', hosts: ['a.example'], value: 'Bearer x' }] });
    expect(JSON.stringify(badName.error?.issues)).toContain('PROCCTL_CRED_<name>');
    const twice = parse({ credentials: [{ name: 'A', hosts: ['a.example'], value: 'v1234' }, { name: 'a', hosts: ['b.example'], value: 'v5678' }] });
    expect(JSON.stringify(twice.error?.issues)).toContain('used twice');
    const hop = parse({ credentials: [{ name: 'A', hosts: ['a.example'], header: 'Host', value: 'v1234' }] });
    expect(JSON.stringify(hop.error?.issues)).toContain('manages');
  });

  it('is enough on its own (no allow needed); header defaults to Authorization; scopes filter who gets it', () => {
    const ok = parse({ credentials: [{ name: 'GH', hosts: ['API.github.com'], value: 'Bearer abcd', scopes: ['ci'] }] });
    expect(ok.success).toBe(true);
    const config = ok.data!;
    expect(credentialsOf(config, 'ci').map((c) => [c.name, c.header, c.hosts])).toEqual([['GH', 'Authorization', ['api.github.com']]]);
    expect(credentialsOf(config, 'other')).toEqual([]);
    expect(JSON.stringify(credentialSummary(config, 'ci'))).not.toContain('abcd');
  });

  it('reads valueFile and valueEnv, says which is missing, and gives each session a fresh placeholder', () => {
    const file = join(dir, 'token');
    writeFileSync(file, 'Bearer from-file\n');
    const config = parse({ credentials: [{ name: 'F', hosts: ['a.example'], valueFile: file }, { name: 'E', hosts: ['b.example'], valueEnv: 'SOME_TOKEN' }] }).data!;
    expect(credentialProblem(config, {})).toMatch(/no SOME_TOKEN \(valueEnv\)/);
    const env = { SOME_TOKEN: 'Bearer from-env' };
    expect(credentialProblem(config, env)).toBeUndefined();
    const one = sessionCredentials(credentialsOf(config, 'x'), env);
    const two = sessionCredentials(credentialsOf(config, 'x'), env);
    expect(one.map((c) => c.value)).toEqual(['Bearer from-file', 'Bearer from-env']);
    expect(one[0].placeholder).not.toBe(two[0].placeholder);
    expect(one[0].placeholder).not.toContain('from-file');
    const gone = parse({ credentials: [{ name: 'G', hosts: ['a.example'], valueFile: join(dir, 'nope') }] }).data!;
    expect(credentialProblem(gone, {})).toMatch(/cannot read valueFile .*ENOENT/);
  });
});

describe('credentials carried by a restart or a crash (SPEC §19, §21)', () => {
  const carried = [
    { name: 'API', hosts: ['api.example', 'b.example'], placeholder: 'procctl-placeholder-API-xyz' },
    { name: 'GONE', hosts: ['g.example'], placeholder: 'procctl-placeholder-GONE-xyz' },
    { name: 'MOVED', hosts: ['m.example'], placeholder: 'procctl-placeholder-MOVED-xyz' },
    { name: 'BROKEN', hosts: ['x.example'], placeholder: 'procctl-placeholder-BROKEN-xyz' },
  ];
  const now = [
    { name: 'api', hosts: ['b.example', 'api.example'], header: 'X-Api-Key', value: 'Bearer rotated' },
    { name: 'MOVED', hosts: ['elsewhere.example'], header: 'Authorization', value: 'Bearer moved' },
    { name: 'BROKEN', hosts: ['x.example'], header: 'Authorization', valueEnv: 'PROCCTL_UNIT_NOT_SET' },
  ];

  it('keeps each placeholder with the value and header the config gives now; one gone, moved to other hosts or unreadable is withdrawn, saying why', () => {
    const [api, gone, moved, broken] = carriedCredentials(now, carried, undefined, {});
    expect(api).toEqual({ name: 'API', hosts: ['api.example', 'b.example'], header: 'x-api-key', value: 'Bearer rotated', placeholder: 'procctl-placeholder-API-xyz' });
    for (const c of [gone, moved, broken]) {
      expect(c.value).toBe('');
      expect(c.placeholder).toMatch(/^procctl-placeholder-/);
      expect(c.withdrawn).toMatch(/^credential_withdrawn: credential \w+ .*start a new session/);
    }
    expect(gone.withdrawn).toContain("no longer in the daemon's config");
    expect(moved.withdrawn).toContain('was given for m.example and the config now gives it for elsewhere.example');
    expect(moved.hosts).toEqual(['m.example']);
    expect(broken.withdrawn).toContain('PROCCTL_UNIT_NOT_SET');
  });

  it('an upstreamCa that cannot be read now withdraws them all', () => {
    const all = carriedCredentials(now, carried.slice(0, 1), 'sandbox.network.upstreamCa /x cannot be read (ENOENT)', {});
    expect(all[0].withdrawn).toContain('upstreamCa /x cannot be read');
  });
});

describe('Scrubber', () => {
  it('replaces a value split across chunks, and holds back nothing that cannot start one', () => {
    const s = new Scrubber([{ find: 'SECRET-VALUE', put: '[credential X]' }]);
    const out = [s.write(Buffer.from('hello SEC')), s.write(Buffer.from('RET-VAL')), s.write(Buffer.from('UE bye S')), s.end()].map(String).join('');
    expect(out).toBe('hello [credential X] bye S');
    expect(String(s.write(Buffer.from('plain output\n')))).toBe('plain output\n');
  });

  it('gives the same text as replacing it whole, however the stream is cut', () => {
    const find = 'abcabd-secret';
    const text = `xx abcab abcabcabd-secret abcabd-secre abcabd-secretabcabd-secret ab`;
    const whole = text.split(find).join('#');
    for (let step = 1; step < 16; step++) {
      const s = new Scrubber([{ find, put: '#' }]);
      let out = '';
      for (let i = 0; i < text.length; i += step) out += String(s.write(Buffer.from(text.slice(i, i + step))));
      expect(out + String(s.end())).toBe(whole);
    }
  });
});

describe('the proxy CA', () => {
  it('is made once under its directory, key 0600, and signs a leaf for a host that its own certificate verifies', () => {
    const caDir = join(dir, 'ca');
    const ca = ProxyCa.open(caDir);
    expect(statSync(join(caDir, 'ca.key')).mode & 0o777).toBe(0o600);
    expect(statSync(caDir).mode & 0o777).toBe(0o700);
    const again = ProxyCa.open(caDir);
    expect(again.certPem).toBe(ca.certPem);
    expect(ca.trustBundle()).toContain(ca.certPem);
    const leafPem = (ca as unknown as { leaf(h: string): string }).leaf('api.example.com');
    const leaf = new X509Certificate(leafPem);
    expect(leaf.checkHost('api.example.com')).toBe('api.example.com');
    expect(leaf.verify(new X509Certificate(ca.certPem).publicKey)).toBe(true);
  });
});
