import { describe, expect, it } from 'vitest';
import { probeAnswer } from '../../../src/shells/shell.js';

/** bash's answer to the probe a crash's next daemon sends (docs/shells.md "A crash"). */
describe('probeAnswer', () => {
  it('reads the last command, its status and the count', () => {
    expect(probeAnswer('probe-0123456789ab:k3m9xq2a:7:12')).toEqual({ last: 'k3m9xq2a', status: 7, count: 12 });
    expect(probeAnswer('probe-0123456789ab:ready:0:')).toEqual({ last: 'ready', status: 0, count: 0 });
  });

  it('looks through a probe bash ran last (a second crash before any command)', () => {
    expect(probeAnswer('probe-bbbbbbbbbbbb:probe-aaaaaaaaaaaa:k3m9xq2a:130:4:0:4')).toEqual({ last: 'k3m9xq2a', status: 130, count: 4 });
  });

  it('says nothing of a record that is not a probe\'s, or a status that is not a number', () => {
    expect(probeAnswer('k3m9xq2a 0 /tmp')).toEqual({ last: '', status: undefined, count: 0 });
    expect(probeAnswer('probe-0123456789ab:x:y:z')).toEqual({ last: 'x', status: undefined, count: 0 });
  });
});
