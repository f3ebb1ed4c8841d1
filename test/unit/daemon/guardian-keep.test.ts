import { closeSync, openSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { loadAddon } from '../../../src/base/addon.js';
import { KeptDescriptors } from '../../../src/daemon/guardian-keep.js';

interface PairAddon {
  keepPair(): [number, number];
  keepSend(socket: number, text: string, fds: number[]): boolean;
}

const addon = loadAddon<PairAddon>(['keepPair', 'keepSend']);
const open: number[] = [];
afterEach(() => {
  for (const fd of open.splice(0)) closeSync(fd);
});

/** The daemon's end and a guardian's keeper over a real datagram pair. */
function pair(): { send: (id: string) => void; keeper: KeptDescriptors } {
  if (addon instanceof Error) throw addon;
  const [daemonEnd, guardianEnd] = addon.keepPair();
  open.push(daemonEnd, guardianEnd);
  const keeper = KeptDescriptors.open(guardianEnd);
  if (keeper instanceof Error) throw keeper;
  return {
    send: (id) => {
      const fd = openSync('/dev/null', 'r');
      expect(addon.keepSend(daemonEnd, JSON.stringify({ id }), [fd])).toBe(true);
      closeSync(fd);
    },
    keeper,
  };
}

describe.skipIf(addon instanceof Error)('the guardian\'s kept descriptors', () => {
  it('which sessions live is asked after the queue is read: a session whose slot came just before its descriptors is kept', () => {
    const { send, keeper } = pair();
    const table = new Set<string>(['old']);
    send('old');
    keeper.drain(() => new Set(table));
    // The daemon writes a new session's slot, then sends its descriptors a few ms later (its first
    // record at once); the guardian's drain falls between: the table it reads must be the later one.
    table.add('young');
    send('young');
    let seenFirst: boolean | undefined;
    keeper.drain(() => {
      seenFirst = keeper.has('young');
      return new Set(table);
    });
    expect(seenFirst).toBe(true);
    expect(keeper.has('young')).toBe(true);
    expect(keeper.has('old')).toBe(true);
  });

  it('a session gone from the table is let go at the next drain', () => {
    const { send, keeper } = pair();
    send('a');
    send('b');
    keeper.drain(() => new Set(['a', 'b']));
    expect(keeper.size).toBe(2);
    keeper.drain(() => new Set(['b']));
    expect(keeper.has('a')).toBe(false);
    expect(keeper.has('b')).toBe(true);
  });
});
