import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { namespaceAdvice, namespaceFacts, type NamespaceFacts } from '../../../src/sandbox/refusal.js';

const root = mkdtempSync(join(tmpdir(), 'procctl-fakeproc-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A directory laid out as /proc with these files. */
function fakeProc(name: string, files: Record<string, string>): string {
  const proc = join(root, name);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(proc, path)), { recursive: true });
    writeFileSync(join(proc, path), text);
  }
  return proc;
}

const STATUS = (seccomp: number) => `Name:\tnode\nUid:\t1000\t1000\t1000\t1000\nSeccomp:\t${seccomp}\nSeccomp_filters:\t${seccomp === 2 ? 1 : 0}\n`;

// What bwrap 0.8 prints in each case (its own wording for EPERM, ENOSPC and a refused uid map).
const NO_PERMISSION = "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces. On e.g. debian this can be enabled with 'sysctl kernel.unprivileged_userns_clone=1'.";
const NO_SPACE = 'bwrap: Creating new namespace failed: No space left on device';
const UID_MAP = 'bwrap: setting up uid map: Permission denied';

describe('why bwrap cannot make its namespaces, and the fix', () => {
  it.each<[string, Record<string, string>, string, RegExp]>([
    ['max_user_namespaces 0', { 'sys/user/max_user_namespaces': '0\n', 'self/status': STATUS(0) }, NO_SPACE, /user\.max_user_namespaces = 0\): allow them with `sysctl -w user\.max_user_namespaces=15000`/],
    ["Debian's unprivileged_userns_clone 0", { 'sys/user/max_user_namespaces': '63000\n', 'sys/kernel/unprivileged_userns_clone': '0\n', 'self/status': STATUS(0) }, NO_PERMISSION, /kernel\.unprivileged_userns_clone = 0\): allow them with `sysctl -w kernel\.unprivileged_userns_clone=1`/],
    ["Ubuntu 24.04's AppArmor restriction", { 'sys/user/max_user_namespaces': '63000\n', 'sys/kernel/apparmor_restrict_unprivileged_userns': '1\n', 'self/status': STATUS(0) }, UID_MAP, /AppArmor restricts user namespaces .*\/etc\/apparmor\.d\/bwrap.*apparmor_parser -r/],
    ["a container's seccomp profile", { 'sys/user/max_user_namespaces': '63000\n', 'self/status': STATUS(2) }, NO_PERMISSION, /seccomp filter that forbids creating namespaces: a container's default profile .*seccomp=unconfined/],
  ])('%s', (_name, files, said, advice) => {
    const facts = namespaceFacts(fakeProc(_name.replace(/\W+/g, '-'), files), false);
    expect(namespaceAdvice(said, facts)).toMatch(advice);
  });

  it('root is not held back by the rules for other users: the AppArmor and clone sysctls are not blamed', () => {
    const facts: NamespaceFacts = { maxUserNamespaces: 63000, unprivilegedClone: 0, apparmorRestrict: 1, seccompFiltered: false, root: true };
    expect(namespaceAdvice(NO_PERMISSION, facts)).toBeUndefined();
  });

  it('a bwrap error that is not about namespaces is left to bwrap\'s own words', () => {
    const facts: NamespaceFacts = { maxUserNamespaces: 0, seccompFiltered: true, root: false };
    expect(namespaceAdvice("bwrap: Can't find source path /nonexistent: No such file or directory", facts)).toBeUndefined();
  });

  it('this host, as it is: the facts are read from the real /proc', () => {
    const facts = namespaceFacts();
    expect(typeof facts.seccompFiltered).toBe('boolean');
    if (facts.maxUserNamespaces !== undefined) expect(facts.maxUserNamespaces).toBeGreaterThanOrEqual(0);
  });
});
