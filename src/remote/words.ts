/**
 * Split a command line into words as a POSIX shell would (`$PROCCTL_SSH_COMMAND`): blanks
 * separate words; single quotes keep everything; double quotes keep all but `$`, and `\` before
 * `$ \` " \\` and a newline; `\` outside quotes escapes the next character; `$NAME` and
 * `${NAME}` expand from `env` (split into words when unquoted); a leading `~/` is `$HOME`; `#`
 * starting a word begins a comment. What needs a real shell (pipes, redirections, `;`,
 * command substitution, special parameters, `~user`) is refused with the reason, rather than
 * guessed at. No globbing: `*` stays `*`.
 */
export function splitWords(line: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const words: string[] = [];
  let word = '';
  // A word exists once anything quoted or literal is in it, even '' (an empty quoted word counts).
  let started = false;
  // At the start of a word in the text itself (what an expansion splits off is not): `~` and `#` act only there.
  let boundary = true;
  const finish = () => {
    if (started) words.push(word);
    word = '';
    started = false;
  };
  const refuse = (what: string, at: number): never => {
    throw new Error(`${what} at character ${at + 1} of ${JSON.stringify(line)}; it takes one command and its words, quoted as for sh (use a wrapper script for more)`);
  };

  /** Read `$…` at i (line[i] === '$'); returns the value (undefined: a literal `$`) and the index after it. */
  const expansion = (i: number): { value: string | undefined; next: number } => {
    const rest = line.slice(i + 1);
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(rest);
    if (name) return { value: env[name[0]] ?? '', next: i + 1 + name[0].length };
    if (rest.startsWith('{')) {
      const braced = /^\{([A-Za-z_][A-Za-z0-9_]*)\}/.exec(rest);
      if (!braced) refuse('only ${NAME} is supported inside braces', i);
      return { value: env[braced![1]] ?? '', next: i + 1 + braced![0].length };
    }
    if (rest.startsWith('(')) refuse('command substitution $(…) is not supported', i);
    if (/^[0-9@*#?$!-]/.test(rest)) refuse(`the special parameter $${rest[0]} is not supported`, i);
    return { value: undefined, next: i + 1 };
  };

  let i = 0;
  while (i < line.length) {
    const ch = line[i];
    const atStart: boolean = boundary;
    boundary = false;
    if (ch === ' ' || ch === '\t' || ch === '\n') {
      finish();
      boundary = true;
      i++;
    } else if (ch === "'") {
      const end = line.indexOf("'", i + 1);
      if (end === -1) refuse('a single quote is not closed', i);
      word += line.slice(i + 1, end);
      started = true;
      i = end + 1;
    } else if (ch === '"') {
      started = true;
      i++;
      for (;;) {
        if (i >= line.length) refuse('a double quote is not closed', line.lastIndexOf('"'));
        const c = line[i];
        if (c === '"') {
          i++;
          break;
        }
        if (c === '\\' && i + 1 < line.length && '$`"\\\n'.includes(line[i + 1])) {
          if (line[i + 1] !== '\n') word += line[i + 1];
          i += 2;
        } else if (c === '$') {
          const { value, next } = expansion(i);
          word += value ?? '$';
          i = next;
        } else if (c === '`') {
          refuse('command substitution `…` is not supported', i);
        } else {
          word += c;
          i++;
        }
      }
    } else if (ch === '\\') {
      if (i + 1 >= line.length) refuse('a backslash ends it', i);
      if (line[i + 1] !== '\n') {
        word += line[i + 1];
        started = true;
      } else boundary = atStart;
      i += 2;
    } else if (ch === '$') {
      const { value, next } = expansion(i);
      i = next;
      if (value === undefined) {
        word += '$';
        started = true;
        continue;
      }
      // Unquoted: the value splits into words at blanks, joining the word around it at its ends.
      const parts = value.split(/[ \t\n]+/);
      for (let p = 0; p < parts.length; p++) {
        if (p > 0) finish();
        if (parts[p] !== '') {
          word += parts[p];
          started = true;
        }
      }
    } else if (ch === '#' && atStart) {
      const nl = line.indexOf('\n', i);
      i = nl === -1 ? line.length : nl;
    } else if (ch === '~' && atStart && (i + 1 === line.length || /[/ \t\n]/.test(line[i + 1]))) {
      if (!env.HOME) refuse('~ needs $HOME, which is not set', i);
      word += env.HOME;
      started = true;
      i++;
    } else if (ch === '~' && atStart) {
      refuse('~user is not supported (write the path)', i);
    } else if ('|&;<>()`'.includes(ch)) {
      refuse(`"${ch}" needs a shell`, i);
    } else {
      word += ch;
      started = true;
      i++;
    }
  }
  finish();
  return words;
}
