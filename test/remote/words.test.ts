import { execFileSync } from 'node:child_process';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { shellQuote } from '../../src/base/shell-quote.js';
import { splitWords } from '../../src/remote/words.js';

const ENV = { HOME: '/home/ann', KEY: '/keys/id ed', EMPTY: '', OPTS: ' -v  -4 ' };

/** How the real /bin/sh splits `line` with ENV (globbing off), as NUL-separated words. */
function shSplit(line: string): string[] {
  const out = execFileSync('/bin/sh', ['-fc', `set -- ${line}\nfor w do printf '%s\\0' "$w"; done`], { env: { ...ENV, PATH: process.env.PATH }, encoding: 'utf8' });
  return out === '' ? [] : out.slice(0, -1).split('\0');
}

describe('splitWords (PROCCTL_SSH_COMMAND)', () => {
  const cases: Array<[string, string[]]> = [
    ['ssh', ['ssh']],
    ['  ssh   -p 22\t-v\n', ['ssh', '-p', '22', '-v']],
    [`ssh -i '/my keys/id' -o "ProxyJump=a b"`, ['ssh', '-i', '/my keys/id', '-o', 'ProxyJump=a b']],
    [`ssh -o User=it\\'s`, ['ssh', '-o', "User=it's"]],
    [`ssh "a\\"b" "c\\$d" "e\\f" 'g\\h'`, ['ssh', 'a"b', 'c$d', 'e\\f', 'g\\h']],
    [`ssh '' ""`, ['ssh', '', '']],
    [`ssh a''b "x"'y'z`, ['ssh', 'ab', 'xyz']],
    ['ssh -i ~/.ssh/k ~ a~b', ['ssh', '-i', '/home/ann/.ssh/k', '/home/ann', 'a~b']],
    ['ssh -i "$KEY" -i $KEY', ['ssh', '-i', '/keys/id ed', '-i', '/keys/id', 'ed']],
    ['ssh ${KEY}x $EMPTY "$EMPTY" $OPTS', ['ssh', '/keys/id', 'edx', '', '-v', '-4']],
    ['ssh a$ $ "$"', ['ssh', 'a$', '$', '$']],
    ['ssh \\\n -v', ['ssh', '-v']],
    ['ssh \\\n~/k x\\\n~/k', ['ssh', '/home/ann/k', 'x~/k']],
    ['ssh -v # a comment', ['ssh', '-v']],
    ['ssh a#b', ['ssh', 'a#b']],
    ['ssh *.example ?', ['ssh', '*.example', '?']],
    ['ssh héllo 𝄞', ['ssh', 'héllo', '𝄞']],
  ];
  it.each(cases)('%j', (line, words) => {
    expect(splitWords(line, ENV)).toEqual(words);
    expect(shSplit(line)).toEqual(words);
  });

  it.each([
    ['ssh | tee', /"\|" needs a shell at character 5/],
    ['ssh; rm', /";" needs a shell/],
    ['ssh > log', /">" needs a shell/],
    ['ssh $(pass)', /command substitution/],
    ['ssh "`pass`"', /command substitution/],
    ['ssh $1', /special parameter \$1/],
    ['ssh ${X:-y}', /only \$\{NAME\}/],
    ['ssh ~root/k', /~user is not supported/],
    ["ssh 'open", /single quote is not closed/],
    ['ssh "open', /double quote is not closed/],
    ['ssh \\', /a backslash ends it/],
  ])('refuses %j, saying why', (line, why) => {
    expect(() => splitWords(line, ENV)).toThrow(why);
  });

  it('gives back any words quoted as for sh, exactly', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: fc.constantFrom('a', ' ', "'", '"', '\\', '$', '\n', '\t', '~', '#', '|', 'é', '𝄞', '`', '*') }), { maxLength: 6 }), (words) => {
        expect(splitWords(words.map(shellQuote).join(' '), ENV)).toEqual(words);
      }),
    );
  });

  it('splits as /bin/sh does, or refuses saying why, for lines made of the supported pieces', () => {
    const piece = fc.constantFrom('ssh', '-p', ' ', '  ', '\t', "'a b'", '"c d"', '"$KEY"', '$KEY', '${OPTS}', '$EMPTY', '""', "''", '\\ ', '\\"', "\\'", '"\\$x"', 'é', '~/k', 'a$ ', 'x', '#', '~');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (pieces) => {
        const line = pieces.join('');
        let ours: string[];
        try {
          ours = splitWords(line, ENV);
        } catch (err) {
          // Refusing is allowed, for what is named as unsupported (~user); guessing is not.
          expect((err as Error).message).toMatch(/~user is not supported/);
          return;
        }
        expect(ours).toEqual(shSplit(line));
      }),
      { numRuns: 60 },
    );
  });
});
