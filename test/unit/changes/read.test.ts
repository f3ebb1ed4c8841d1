import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { diff, fromBytes, read, shown, toBytes } from '../../../src/changes/index.js';
import { cannotMount, cleanup, inOverlay, layers, type Format, type Layers } from './overlay.js';

/** The workspace every ordinary test starts from. */
function seed(l: Layers) {
  writeFileSync(join(l.lower, 'keep.txt'), 'unchanged\n');
  writeFileSync(join(l.lower, 'edit.txt'), 'one\ntwo\nthree\n');
  writeFileSync(join(l.lower, 'gone.txt'), 'bye\n');
  writeFileSync(join(l.lower, 'old-name.txt'), 'moved\n');
  writeFileSync(join(l.lower, 'run.sh'), 'echo hi\n');
  chmodSync(join(l.lower, 'run.sh'), 0o644);
  mkdirSync(join(l.lower, 'tree/deep'), { recursive: true });
  writeFileSync(join(l.lower, 'tree/deep/a'), 'a\n');
  mkdirSync(join(l.lower, 'box'));
  writeFileSync(join(l.lower, 'box/old'), 'old\n');
  writeFileSync(join(l.lower, 'box/kept-name'), 'before\n');
  symlinkSync('keep.txt', join(l.lower, 'link'));
}

const byPath = (files: { path: string }[]) => Object.fromEntries(files.map((f) => [f.path, f]));

for (const format of ['trusted', 'user'] as Format[]) {
  describe(`read: an upper directory the kernel wrote (${format}.overlay.*)`, () => {
    let l: Layers | undefined;
    afterEach(() => {
      if (l) cleanup(l);
      l = undefined;
    });

    it('names each change with its kind, sizes, modes and targets', (ctx) => {
      const why = cannotMount(format);
      if (why) return ctx.skip(why);
      l = layers();
      seed(l);
      inOverlay(
        l,
        [
          'echo new > added.txt',
          "printf 'one\\nTWO\\nthree\\n' > edit.txt",
          'rm gone.txt',
          'mv old-name.txt new-name.txt',
          'chmod 755 run.sh',
          'rm -rf tree',
          'ln -s edit.txt newlink',
          'rm link && ln -s gone.txt link',
          'rm -rf box && mkdir box && echo after > box/kept-name && echo fresh > box/new',
          'mkdir -p made/sub && echo x > made/sub/file',
          "touch keep.txt",
        ].join('; '),
        format,
      );
      const set = read(l.upper, l.lower, { xattrs: format });
      const files = byPath(set.files);
      expect(Object.keys(files).sort()).toEqual(
        ['added.txt', 'box/kept-name', 'box/new', 'box/old', 'edit.txt', 'gone.txt', 'link', 'made', 'made/sub', 'made/sub/file', 'new-name.txt', 'newlink', 'old-name.txt', 'run.sh', 'tree'].sort(),
      );
      expect(files['added.txt']).toMatchObject({ kind: 'added', type: 'file', size: 4 });
      expect(files['edit.txt']).toMatchObject({ kind: 'modified', size: 14, oldSize: 14 });
      expect(files['gone.txt']).toMatchObject({ kind: 'deleted', oldType: 'file', oldSize: 4 });
      expect(files['old-name.txt'].kind).toBe('deleted');
      expect(files['new-name.txt'].kind).toBe('added');
      expect(files['run.sh']).toMatchObject({ kind: 'mode', mode: 0o755, oldMode: 0o644 });
      expect(files.tree).toMatchObject({ kind: 'deleted', oldType: 'dir' });
      expect(files.newlink).toMatchObject({ kind: 'symlink', target: 'edit.txt' });
      expect(files.link).toMatchObject({ kind: 'symlink', target: 'gone.txt', oldType: 'symlink' });
      // The opaque directory: what the lower had and the upper lacks is deleted.
      expect(files['box/old'].kind).toBe('deleted');
      expect(files['box/kept-name'].kind).toBe('modified');
      expect(files['box/new'].kind).toBe('added');
      expect(files.made).toMatchObject({ kind: 'added', type: 'dir' });
      expect(set.totals).toEqual({ files: 15, added: 7, modified: 4, deleted: 4, bytes: 4 + 14 + 6 + 6 + 6 + 2 });
    });

    it('carries a name with a newline and one that is not UTF-8 exactly, escaped in JSON', (ctx) => {
      const why = cannotMount(format);
      if (why) return ctx.skip(why);
      l = layers();
      inOverlay(l, `printf 1 > "$(printf 'two\\nlines')"; printf 2 > "$(printf 'bad\\377name')"`, format);
      const set = read(l.upper, l.lower, { xattrs: format });
      const paths = set.files.map((f) => f.path).sort();
      expect(paths).toEqual(['bad\udcffname', 'two\nlines']);
      expect(toBytes('bad\udcffname')).toEqual(Buffer.from([0x62, 0x61, 0x64, 0xff, 0x6e, 0x61, 0x6d, 0x65]));
      expect(JSON.stringify(paths)).toBe('["bad\\udcffname","two\\nlines"]');
      expect(JSON.parse(JSON.stringify(paths))).toEqual(paths);
      expect(shown('bad\udcffname')).toBe('"bad\\xffname"');
      expect(shown('two\nlines')).toBe('"two\\nlines"');
      expect(fromBytes(toBytes('\u{1F600}\udcfe'))).toBe('\u{1F600}\udcfe');
    });

    it('diffs text files, and names binary and large ones with their sizes', (ctx) => {
      const why = cannotMount(format);
      if (why) return ctx.skip(why);
      l = layers();
      seed(l);
      writeFileSync(join(l.lower, 'blob'), Buffer.from([1, 0, 2]));
      inOverlay(l, "printf 'one\\nTWO\\nthree\\n' > edit.txt; printf 'a\\0b' > blob; head -c 2000000 /dev/zero | tr '\\0' x > big; echo new > added.txt", format);
      const set = read(l.upper, l.lower, { xattrs: format });
      const page = diff(set.files, l.upper, l.lower);
      expect(page.text).toContain('--- a/edit.txt\n+++ b/edit.txt');
      expect(page.text).toContain('-two\n+TWO');
      expect(page.text).toContain('--- /dev/null\n+++ b/added.txt');
      expect(page.text).toContain('Binary files differ: 3 -> 3 bytes');
      expect(page.text).toContain('Files over 1048576 bytes not shown: 0 -> 2000000 bytes');
      const second = diff(set.files, l.upper, l.lower, { offset: 2, limit: 3 });
      expect(second.from).toBe(2);
      expect(second.text.split('\n')).toEqual(page.text.split('\n').slice(2, 5));
      expect(second.hint).toMatch(/pass offset: 5/);
    });
  });
}
