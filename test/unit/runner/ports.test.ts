import { spawn } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { describe, expect, it } from 'vitest';
import { listenRows, parseLocal } from '../../../src/runner/ports.js';
import { listeningFromKernel, readTable } from '../../../src/runner/ports-read.js';

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

describe("a namespace's listening sockets from the kernel's socket diagnostics", () => {
  const procRows = (pid: number) => listenRows(readFileSync(`/proc/${pid}/net/tcp6`, 'latin1'), true, listenRows(readFileSync(`/proc/${pid}/net/tcp`, 'latin1'), false));
  const listen = (server: Server, port: number, host: string) => new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, () => resolve()));
  const ownNs = () => readlinkSync('/proc/self/ns/net');

  it('finds what /proc/net/tcp{,6} list as LISTEN, by inode, address and port (v4, v6, v6 only, any address)', async () => {
    const servers = [createServer(), createServer(), createServer()];
    try {
      await listen(servers[0], 0, '127.0.0.1');
      await listen(servers[1], 0, '::1');
      await listen(servers[2], 0, '::');
      const fromKernel = listeningFromKernel(process.pid, ownNs());
      if (!fromKernel) return expect.fail('the addon answered no sockets: it is built by `npm run build` (node scripts/build-addon.mjs)');
      const ports = servers.map((s) => (s.address() as AddressInfo).port);
      for (const [port, address] of [[ports[0], '127.0.0.1'], [ports[1], '::1'], [ports[2], '::']] as const) {
        expect([...fromKernel.values()]).toContainEqual({ address, port });
      }
      // The same sockets as /proc lists (others on the host may come and go between the two reads: those ours are the same).
      const proc = procRows(process.pid);
      for (const [inode, p] of fromKernel) if (ports.includes(p.port)) expect(proc.get(inode)).toEqual(p);
      const table = readTable(process.pid, ownNs(), Date.now(), undefined, () => 't1');
      expect([...table.listening.values()].filter((p) => ports.includes(p.port)).length).toBe(3);
    } finally {
      for (const s of servers) s.close();
    }
  });

  it("answers another namespace's sockets, not this one's, through a process in it", async (ctx) => {
    // A listener in a network namespace of its own (as a sandboxed session's): unshare -n as root, -rn otherwise.
    const args = process.getuid?.() === 0 ? ['-n'] : ['-rn'];
    const child = spawn('unshare', [...args, process.execPath, '-e', "require('net').createServer().listen(4321, '0.0.0.0', () => console.log('up')); setTimeout(() => {}, 60000)"], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const up = await new Promise<boolean>((resolve) => {
        child.stdout.once('data', () => resolve(true));
        child.once('exit', () => resolve(false));
        child.once('error', () => resolve(false));
      });
      if (!up) return ctx.skip();
      // unshare execs node: the child's pid is the listener's.
      const ns = readlinkSync(`/proc/${child.pid}/ns/net`);
      expect(ns).not.toBe(ownNs());
      const table = readTable(child.pid!, ns, Date.now(), undefined, () => 't1');
      expect([...table.listening.values()]).toEqual([{ address: '0.0.0.0', port: 4321 }]);
      expect([...table.listening]).toEqual([...procRows(child.pid!)]);
      // As root the kernel is asked in that namespace (a thread made for the question joins it); otherwise /proc was read.
      if (process.getuid?.() === 0) {
        expect([...(listeningFromKernel(child.pid!, ns) ?? [])]).toEqual([...table.listening]);
        // A pid whose namespace is no longer the one named (the process gone, its pid another's): nothing read, and the next read still asks the kernel.
        expect(listeningFromKernel(child.pid!, 'net:[1]')).toBeUndefined();
        expect([...(listeningFromKernel(child.pid!, ns) ?? [])]).toEqual([...table.listening]);
      }
    } finally {
      child.kill('SIGKILL');
    }
  });
});
