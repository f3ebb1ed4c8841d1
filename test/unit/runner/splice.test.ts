import { closeSync, constants, existsSync, fstatSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeSpawner, posixSpawn, type Addon } from '../../../src/runner/native.js';
import { setSpliceListener, splicer, SpliceRoute } from '../../../src/runner/launch/splice.js';
import { incompleteTailLength as incompleteTail, SessionOutput, type Stream } from '../../../src/session/output.js';
import { Spool } from '../../../src/session/spool.js';

/**
 * The splice reader (runner/launch/splice.ts, native/splice.c): real jobs' pipes moved into a real
 * spool file by the kernel, the bytes read back and handed on in the order they were taken.
 */

const addon = nativeSpawner() as Addon;
const splice = splicer(addon)!;
const root = mkdtempSync(join(tmpdir(), 'procctl-splice-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = () => join(root, `case-${++n}.log`);
const KiB = 1024;
const MiB = 1024 * KiB;

/**
 * Run `cmd` with its output spliced into `spool`, captured as a session captures it (session/output.ts:
 * what was not spliced is written by the capture, a stream's unfinished character at the end as
 * U+FFFD): what was handed on (in order), once both pipes closed and the job exited.
 */
function run(cmd: string, spool: Spool, opts: { output?: SessionOutput } = {}): Promise<{ chunks: [Stream, string][]; fds: [number, number][]; output: SessionOutput }> {
  const output = opts.output ?? new SessionOutput(1_000_000, 1_000_000);
  return new Promise((resolve) => {
    const chunks: [Stream, string][] = [];
    let pending = 3;
    const fds: [number, number][] = [];
    const done = () => {
      if (--pending > 0) return;
      // The session's end (Session.finish): each stream's decoder flushed into the spool.
      output.end('stdout', spool);
      output.end('stderr', spool);
      resolve({ chunks, fds, output });
    };
    const child = posixSpawn(addon, '/bin/sh', ['sh', '-c', cmd], { PATH: process.env.PATH }, '/', true, done);
    const route = new SpliceRoute(splice, spool, Buffer.alloc(64 * KiB), (stream) => output.unfinished(stream));
    for (const [fd, stream] of [[child.stdout, 'stdout'], [child.stderr, 'stderr']] as const) {
      fds.push([fd, fstatSync(fd).ino]);
      // The buffer is valid only during the call, as with the daemon's shared read buffer: copied here.
      route
        .pipe(fd, stream, (s, chunk, spooled) => {
          chunks.push([s, chunk.toString('latin1')]);
          output.capture(s, chunk, spooled ? undefined : spool);
        })
        .once('close', done);
    }
  });
}

const text = (chunks: [Stream, string][]) => chunks.map(([, t]) => t).join('');
const lines = (count: number) => Array.from({ length: count }, (_, i) => `${i}\n`).join('');

describe('the splice reader', () => {
  it('puts stdout and stderr in the spool in the order it hands them on, and both agree with what was printed', async () => {
    const spool = new Spool(fresh(), 64 * MiB);
    const { chunks } = await run('for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; sleep 0.02; done', spool);
    await spool.drained();
    expect(readFileSync(spool.file, 'latin1')).toBe(text(chunks));
    expect(chunks.filter(([s]) => s === 'stderr').map(([, t]) => t).join('')).toBe('err1\nerr2\nerr3\nerr4\nerr5\n');
    expect(chunks.filter(([s]) => s === 'stdout').map(([, t]) => t).join('')).toBe('out1\nout2\nout3\nout4\nout5\n');
    expect(spool.totalBytes).toBe(text(chunks).length);
  });

  it('hands on each burst as it comes (an empty pipe is EAGAIN, not an end) and closes at end of file, descriptors and all', async () => {
    const spool = new Spool(fresh(), 64 * MiB);
    const { chunks, fds } = await run('echo first; sleep 0.3; echo second', spool);
    expect(chunks.map(([, t]) => t)).toEqual(['first\n', 'second\n']);
    expect(readFileSync(spool.file, 'latin1')).toBe('first\nsecond\n');
    // Its pipes' descriptors are closed once the turn of their end is over (the number free, or another file's since).
    await new Promise((r) => setImmediate(r));
    for (const [fd, ino] of fds) {
      let now: number | undefined;
      try {
        now = fstatSync(fd).ino;
      } catch {
        now = undefined;
      }
      expect(now).not.toBe(ino);
    }
  });

  it('a job that prints nothing opens no spool file: its pipes end without asking where to go', async () => {
    const spool = new Spool(fresh(), 64 * MiB);
    const { chunks } = await run('true', spool);
    await spool.drained();
    expect(chunks).toEqual([]);
    expect(existsSync(spool.file)).toBe(false);
    expect(spool.totalBytes).toBe(0);
  });

  it('one stream closed early and the other printing later: the file is opened for the bytes, and holds them all', async () => {
    const spool = new Spool(fresh(), 64 * MiB);
    // stdout ends at once with nothing in it; stderr prints after that end was handled.
    const { chunks } = await run('exec 1>&-; sleep 0.2; echo late >&2; echo later >&2', spool);
    await spool.drained();
    expect(text(chunks)).toBe('late\nlater\n');
    expect(readFileSync(spool.file, 'latin1')).toBe('late\nlater\n');
    expect(spool.totalBytes).toBe('late\nlater\n'.length);
  });

  it('never splices across a segment: each is cut at half the cap exactly, the rest rotated away and counted', async () => {
    const spool = new Spool(fresh(), 64 * KiB);
    const want = lines(40_000); // 228,890 bytes: several rotations of 32 KiB segments
    const { chunks } = await run('i=0; while [ $i -lt 40000 ]; do echo $i; i=$((i+1)); done', spool);
    await spool.drained();
    expect(text(chunks)).toBe(want);
    expect(statSync(`${spool.file}.1`).size).toBe(32 * KiB);
    const kept = spool.read();
    expect(want.endsWith(kept)).toBe(true);
    expect(spool.totalBytes).toBe(want.length);
    expect(spool.dropped.rotated + kept.length).toBe(want.length);
  });

  it('goes on where a resumed spool ends (a restart): nothing written over, the next output after it', async () => {
    const file = fresh();
    writeFileSync(file, 'before the restart\n');
    const spool = Spool.resume(file, 64 * MiB, undefined, { totalBytes: 19, droppedBytes: 0 });
    const { chunks } = await run('echo after', spool);
    expect(text(chunks)).toBe('after\n');
    expect(readFileSync(file, 'latin1')).toBe('before the restart\nafter\n');
    expect(spool.totalBytes).toBe(19 + 6);
  });

  it('while the spool takes no splice (its budget spent), reads the pipes into its writes, and splices again once they are written: nothing lost, nothing twice', async () => {
    /** Takes splices in turns of 256 KiB, refusing one while it writes the next 256 KiB it is given as today (the budget spent, then refilled). */
    class Turns extends Spool {
      modes: string[] = [];
      private turn = 0;
      override spliceAt() {
        const at = this.turn >= 256 * KiB ? undefined : super.spliceAt();
        return at && { ...at, room: Math.min(at.room, 256 * KiB - this.turn) };
      }
      override spliced(bytes: number) {
        if (this.modes.at(-1) !== 'splice') this.modes.push('splice');
        this.turn += bytes;
        return super.spliced(bytes);
      }
      override write(data: Buffer | string) {
        if (this.modes.at(-1) !== 'write') this.modes.push('write');
        this.turn -= data.length;
        if (this.turn < 0) this.turn = 0;
        super.write(data);
      }
    }
    const spool = new Turns(fresh(), 64 * MiB);
    const want = lines(300_000); // 1.9 MB
    const { chunks } = await run('i=0; while [ $i -lt 300000 ]; do echo $i; i=$((i+1)); done', spool);
    await spool.drained();
    expect(text(chunks)).toBe(want);
    expect(readFileSync(spool.file, 'latin1')).toBe(want);
    expect(spool.totalBytes).toBe(want.length);
    expect(spool.modes.slice(0, 3)).toEqual(['splice', 'write', 'splice']);
  }, 60_000);

  it('the spool\'s own budget: past its first 8 MiB a spool gives no room to splice until the budget refills', () => {
    const spool = new Spool(fresh(), 64 * MiB);
    const at = spool.spliceAt()!;
    expect(at.room).toBe(8 * MiB);
    expect(at.offset).toBe(0);
    // As if 9 MiB were spliced now: 1 MiB over, which takes 64 ms of the 16 MiB/s to earn back.
    spool.spliced(9 * MiB);
    expect(spool.spliceAt()).toBeUndefined();
    spool.remove();
  });

  it('a spool closed while its job prints (a shutdown) is let go: the file that takes its descriptor\'s number gets nothing, the pipes are read to their end', async () => {
    const spool = new Spool(fresh(), 64 * MiB);
    const other = fresh();
    const gate = join(root, `gate-${n}`);
    const running = run(`echo before; while [ ! -e ${gate} ]; do sleep 0.02; done; echo after`, spool);
    await new Promise<void>((resolve) => {
      const look = setInterval(() => {
        if (existsSync(spool.file) && statSync(spool.file).size > 0) {
          clearInterval(look);
          resolve();
        }
      }, 10);
    });
    await spool.close();
    // Likely the closed segment's number: the reader must not splice into it.
    const otherFd = openSync(other, constants.O_RDWR | constants.O_CREAT);
    writeFileSync(gate, '');
    const { chunks } = await running;
    expect(text(chunks)).toBe('before\nafter\n');
    expect(readFileSync(spool.file, 'latin1')).toBe('before\n');
    expect(statSync(other).size).toBe(0);
    closeSync(otherFd);
  });

  it('a file that takes no splice (EINVAL) turns the session to reading for good, said once, and loses nothing', async () => {
    const said: string[] = [];
    setSpliceListener((file, reason) => said.push(`${file}: ${reason}`));
    const file = fresh();
    // O_APPEND: splice(2) refuses it with EINVAL, as a file system without splice_write does.
    class AppendOnly extends Spool {
      override spliceAt() {
        const at = super.spliceAt();
        return at && { ...at, fd: openSync(file, constants.O_WRONLY | constants.O_APPEND) };
      }
    }
    const spool = new AppendOnly(file, 64 * MiB);
    const { chunks } = await run('for i in 1 2 3; do echo line$i; echo err$i >&2; sleep 0.05; done', spool);
    await spool.drained();
    setSpliceListener(() => undefined);
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/EINVAL/);
    expect(text(chunks).split('\n').sort().join('\n')).toBe(['', 'err1', 'err2', 'err3', 'line1', 'line2', 'line3'].join('\n'));
    expect(readFileSync(file, 'latin1')).toBe(text(chunks));
  });
});

/** A spool that notes how it was given output, in turns: 'splice' (spliced into it) or 'write' (handed to its write). */
class Watched extends Spool {
  modes: string[] = [];
  override spliced(bytes: number) {
    if (bytes > 0 && this.modes.at(-1) !== 'splice') this.modes.push('splice');
    return super.spliced(bytes);
  }
  override write(data: Buffer | string) {
    if (this.modes.at(-1) !== 'write') this.modes.push('write');
    super.write(data);
  }
}

/** A spool whose budget is spent for good: it never gives room, every read goes to its write. */
class Spent extends Spool {
  override spliceAt() {
    return undefined;
  }
}

/** What a session reading the same chunks (not spliced) writes to its spool: each stream decoded on its own, flushed at the end. */
function asRead(chunks: [Stream, string][]): Buffer {
  const o = new SessionOutput(1_000_000, 1_000_000);
  const out: Buffer[] = [];
  const sink = { write: (d: Buffer | string) => out.push(Buffer.from(d as Buffer)) };
  for (const [s, t] of chunks) o.capture(s, Buffer.from(t, 'latin1'), sink);
  o.end('stdout', sink);
  o.end('stderr', sink);
  return Buffer.concat(out);
}

/** Resolves once `cond` holds (checked every 10 ms; the test's own timeout bounds it). */
const until = (cond: () => boolean) =>
  new Promise<void>((resolve) => {
    const look = setInterval(() => {
      if (cond()) {
        clearInterval(look);
        resolve();
      }
    }, 10);
  });

describe('a stream\'s unfinished character: the capture\'s, spliced or read', () => {
  it('split between spliced batches with the other stream printing between its bytes: whole in the spool, once, then spliced again', async () => {
    const spool = new Watched(fresh(), 64 * MiB);
    const gate = join(root, `gate-${n}`);
    const output = new SessionOutput(1_000_000, 1_000_000);
    const running = run(`printf 'x\\342\\202'; sleep 0.1; echo ERR >&2; sleep 0.1; printf '\\254\\n'; while [ ! -e ${gate} ]; do sleep 0.02; done; echo done`, spool, { output });
    // The character is whole in the spool and nothing is held: the pipes are spliced again once it drained.
    await until(() => existsSync(spool.file) && readFileSync(spool.file, 'utf8').endsWith('€\n') && !output.unfinished('stdout'));
    await spool.drained();
    writeFileSync(gate, '');
    const { chunks } = await running;
    await spool.drained();
    expect(readFileSync(spool.file, 'utf8')).toBe('xERR\n€\ndone\n');
    expect(readFileSync(spool.file)).toEqual(asRead(chunks));
    expect(output.text()).toBe('xERR\n€\ndone\n');
    expect(spool.totalBytes).toBe(Buffer.byteLength('xERR\n€\ndone\n'));
    expect(spool.modes[0]).toBe('splice');
    expect(spool.modes).toContain('write');
    expect(spool.modes.at(-1)).toBe('splice');
  });

  it.each([
    ['spliced', (f: string) => new Spool(f, 64 * MiB)],
    ['read (its budget spent)', (f: string) => new Spent(f, 64 * MiB)],
  ])('a stream that ends inside a character (%s): its bytes are in the spool once, as U+FFFD where the session\'s end puts them, as for a job read', async (_, make) => {
    const spool = make(fresh());
    // stdout ends inside a character (closed early); stderr prints after that.
    const { chunks, output } = await run(`printf 'x\\342\\202'; exec 1>&-; sleep 0.2; echo ERR >&2`, spool);
    await spool.drained();
    expect(output.text()).toBe('xERR\n\uFFFD');
    expect(readFileSync(spool.file, 'utf8')).toBe('xERR\n\uFFFD');
    expect(readFileSync(spool.file)).toEqual(asRead(chunks));
  });

  it('a character the capture was handed half read (a restart) is written whole: the pipes are read until its rest comes', async () => {
    const file = fresh();
    writeFileSync(file, 'x');
    const spool = Spool.resume(file, 64 * MiB, undefined, { totalBytes: 1, droppedBytes: 0 });
    const output = new SessionOutput(1_000_000, 1_000_000);
    output.restoreHeld('stdout', Buffer.from([0xe2, 0x82]));
    expect(output.unfinished('stdout')).toBe(true);
    await run(`echo ERR >&2; sleep 0.1; printf '\\254\\n'`, spool, { output });
    await spool.drained();
    expect(readFileSync(file, 'utf8')).toBe('xERR\n€\n');
  });

  it('a planned restart\'s trim: the first bytes of a character spliced past the spool\'s count are cut from the file; the next image writes them once, whole', async () => {
    const spool = new Spool(fresh(), 64 * MiB);
    const gate = join(root, `gate-${n}`);
    const output = new SessionOutput(1_000_000, 1_000_000);
    const running = run(`printf 'x\\342\\202'; while [ ! -e ${gate} ]; do sleep 0.02; done`, spool, { output });
    await until(() => output.unfinished('stdout'));
    // Spliced: on disk, past what the spool counts; the capture holds them.
    expect(statSync(spool.file).size).toBe(3);
    expect(spool.totalBytes).toBe(1);
    spool.trimToCount();
    expect(readFileSync(spool.file, 'latin1')).toBe('x');
    // The next image: the spool resumed at the file's size, the capture given the held bytes, the rest read.
    const next = Spool.resume(spool.file, 64 * MiB, undefined, spool.counts());
    const after = new SessionOutput(1_000_000, 1_000_000);
    after.restoreHeld('stdout', output.heldBytes().stdout!);
    after.capture('stdout', Buffer.from([0xac, 0x0a]), next);
    await next.drained();
    expect(readFileSync(spool.file, 'utf8')).toBe('x€\n');
    expect(next.totalBytes).toBe(5);
    // This image's spool is gone with it (the job's end must not write into the next image's file).
    spool.remove();
    writeFileSync(gate, '');
    await running;
  });
});

describe('incompleteTail', () => {
  it('counts the bytes of a character whose rest has not come, and nothing for whole ones', () => {
    for (const ch of ['a', 'é', '€', '😀']) {
      const b = Buffer.from(`x${ch}`, 'utf8');
      expect(incompleteTail(b)).toBe(0);
      for (let k = 1; k < b.length - 1; k++) expect(incompleteTail(b.subarray(0, b.length - k))).toBe(b.length - 1 - k);
    }
    // Stray continuation bytes or an invalid lead are not held: they are bytes as they came.
    expect(incompleteTail(Buffer.from([0x80, 0x80, 0x80]))).toBe(0);
    expect(incompleteTail(Buffer.from([0x61, 0xff]))).toBe(0);
    expect(incompleteTail(Buffer.alloc(0))).toBe(0);
  });
});
