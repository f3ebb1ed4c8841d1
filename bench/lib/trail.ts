import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { fileName } from '../../src/audit/files.js';
import { GENESIS, hashOf, lineOf } from '../../src/audit/line.js';

/** A trail as the writer makes it (files of 32 MiB, chained), `n` records evenly between `from` and `to`. */
export function writeSynthetic(dir: string, n: number, from: number, to: number): { files: number; bytes: number } {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const FILE_BYTES = 32 * 1024 * 1024;
  let file = 1;
  let fd = openSync(join(dir, fileName(file)), 'a', 0o600);
  let size = 0;
  let bytes = 0;
  let prev = GENESIS;
  let chunk = '';
  const step = (to - from) / n;
  for (let seq = 1; seq <= n; seq++) {
    const i = Math.floor((seq - 1) / 2);
    const id = `s${i.toString(36).padStart(7, '0')}`;
    const scope = `agent-${i % 5}`;
    const body =
      seq % 2 === 1
        ? { type: 'session', sessionId: id, scope, peer: { uid: 1000, pid: 4242, exe: '/usr/bin/node' }, client: { kind: 'mcp', name: 'claude-code' }, host: 'bench', command: i % 97 === 0 ? `./deploy.sh --env staging ${i}` : `npm test -- --shard ${i % 8}`, workdir: '/srv/app', sandbox: 'workspace-write', network: false, changes: 'direct', elevated: false }
        : { type: 'end', sessionId: id, scope, status: i % 13 === 0 ? 'failed' : 'completed', exit: i % 13 === 0 ? 1 : 0, signal: null, reason: null, runtimeMs: 1234, resources: null, outputBytes: 5678 };
    const line = lineOf(seq, new Date(from + seq * step).toISOString(), prev, body);
    prev = hashOf(line);
    chunk += `${line}\n`;
    if (chunk.length > 1 << 20 || seq === n) {
      writeSync(fd, chunk);
      size += chunk.length;
      bytes += chunk.length;
      chunk = '';
      if (size >= FILE_BYTES && seq < n) {
        closeSync(fd);
        fd = openSync(join(dir, fileName(++file)), 'a', 0o600);
        size = 0;
      }
    }
  }
  closeSync(fd);
  return { files: file, bytes };
}
