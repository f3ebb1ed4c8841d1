import { closeSync, fstatSync, readSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../../src/config/schema.js';
import { planLaunch } from '../../../src/sandbox/plan.js';
import { filterProblem, unixSocketFilter } from '../../../src/sandbox/seccomp.js';
import { SKIP_SANDBOX } from '../../integration/sandbox-support.js';

const unavailable = filterProblem();

describe.skipIf(unavailable !== undefined)('the sandbox seccomp filter', () => {
  it('is a BPF program libseccomp built, in a fresh descriptor each time, ready to read from the start', () => {
    const a = unixSocketFilter();
    const b = unixSocketFilter();
    try {
      expect(a).not.toBe(b);
      const size = fstatSync(a).size;
      // struct sock_filter is 8 bytes: a whole number of instructions, more than the two a bare "allow" takes.
      expect(size % 8).toBe(0);
      expect(size).toBeGreaterThan(16);
      const first = Buffer.alloc(size);
      expect(readSync(a, first, 0, size, null)).toBe(size);
      const second = Buffer.alloc(size);
      readSync(b, second, 0, size, null);
      expect(second.equals(first)).toBe(true);
    } finally {
      closeSync(a);
      closeSync(b);
    }
  });
});

describe.skipIf(SKIP_SANDBOX || unavailable !== undefined)('a sandboxed plan and the filter', () => {
  const job = { shell: '/bin/sh', args: ['-c', 'true'], cwd: '/', scratch: undefined, hidden: [], channel: 99 };
  const config = (sandbox: object) => ConfigSchema.parse({ sandbox: { mode: 'read-only', ...sandbox } });

  it('hands bwrap the filter and the job its channel, and nothing else; release closes the filter', () => {
    const plan = planLaunch({ config: config({}), scope: 'default', elevated: false }, job);
    const at = plan.args.indexOf('--seccomp');
    expect(at).toBeGreaterThan(0);
    expect(at).toBeLessThan(plan.args.indexOf('--'));
    const filter = Number(plan.args[at + 1]);
    expect(plan.inherit).toEqual([99, filter]);
    expect(plan.steps?.keep).toEqual([99, filter]);
    expect(fstatSync(filter).size).toBeGreaterThan(0);
    plan.release();
    expect(() => fstatSync(filter)).toThrow(/EBADF/);
  });

  it('sandbox.allowUnixSockets: true gives no filter', () => {
    const plan = planLaunch({ config: config({ allowUnixSockets: true }), scope: 'default', elevated: false }, job);
    expect(plan.args).not.toContain('--seccomp');
    expect(plan.inherit).toEqual([99]);
  });
});
