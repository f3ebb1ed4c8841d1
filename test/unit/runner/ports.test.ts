import { describe, expect, it } from 'vitest';
import { listenRows, parseLocal } from '../../../src/runner/ports.js';

// Rows as the kernel writes them (x86: each 32-bit word in host order, little-endian).
const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0000000000000000 20 4 30 10 -1
`;
const TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 666 1 0000000000000000 100 0 0 10 0
   3: B80D0120000000000000000001000000:0051 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0
`;

describe('the LISTEN rows of /proc/net/tcp{,6}', () => {
  it('keeps listening sockets by inode, with address and port; a connected one is not listening', () => {
    expect([...listenRows(TCP, false)]).toEqual([
      ['111', { address: '127.0.0.1', port: 8080 }],
      ['222', { address: '0.0.0.0', port: 22 }],
    ]);
  });

  it('writes v6 addresses as RFC 5952 does: ::, ::1, v4-mapped, the longest zero run compressed', () => {
    expect([...listenRows(TCP6, true).values()]).toEqual([
      { address: '::', port: 80 },
      { address: '::1', port: 3000 },
      { address: '::ffff:127.0.0.1', port: 8081 },
      { address: '2001:db8::1', port: 81 },
    ]);
    expect(parseLocal('0100007F:0000', false)).toEqual({ address: '127.0.0.1', port: 0 });
  });
});
