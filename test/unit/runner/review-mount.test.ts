import { describe, expect, it } from 'vitest';
import { reviewMountError } from '../../../src/runner/launch/pipes.js';

/** A review session whose overlay the spawner could not mount is refused saying why and what to do, never run with direct writes. */
describe('review mount failures', () => {
  const mounts = { userns: true, overlays: [{ target: '/srv/ws', options: 'lowerdir=/srv/ws' }] };
  const fail = (syscall: string, code: string) => Object.assign(new Error(`${syscall}: ${code}`), { syscall, code }) as NodeJS.ErrnoException;

  it('names the workspace, the failed step and its code, and says the command did not run', () => {
    const text = reviewMountError(fail('overlay', 'EINVAL'), mounts);
    expect(text).toContain('/srv/ws');
    expect(text).toContain('overlay failed (EINVAL)');
    expect(text).toMatch(/file systems overlayfs takes/);
    expect(text).toMatch(/The command was not run; run it with changes "direct"/);
  });

  it('tells a refused mount and a refused namespace apart', () => {
    expect(reviewMountError(fail('overlay', 'EPERM'), mounts)).toMatch(/does not let this daemon mount an overlay/);
    expect(reviewMountError(fail('unshare', 'EPERM'), mounts)).toMatch(/unprivileged user namespaces/);
  });

  it('says a failed join of namespaces made ahead is worth running again, not a host to reconfigure', () => {
    const text = reviewMountError(fail('setns', 'EINVAL'), mounts);
    expect(text).toContain('setns failed (EINVAL)');
    expect(text).toMatch(/made ahead.*run the command again/);
    expect(text).not.toMatch(/unprivileged user namespaces/);
  });
});
