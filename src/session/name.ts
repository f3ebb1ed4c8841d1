/** Split a command line into words, honouring simple quotes; good enough for a label. */
function words(command: string): string[] {
  const out: string[] = [];
  // A word is a run of unquoted characters and quoted strings (`A="x y"` is one word); a
  // redirection (`>`, `2>&1`) or an operator, newline included, ends the first simple command.
  const re = /(\d*[<>]+&?\d*-?)|([;&|()\n]+)|((?:"(?:[^"\\]|\\.)*"?|'[^']*'?|[^\s;&|()<>"'])+)/g;
  for (let m = re.exec(command); m; m = re.exec(command)) {
    if (m[3] === undefined) {
      if (out.length > 0) break; // the first simple command ends at an operator
      continue;
    }
    const word = m[3].replace(/"((?:[^"\\]|\\.)*)"?|'([^']*)'?/g, (_, d, q) => d ?? q);
    if (word.trim()) out.push(word); // an empty or blank quoted word ("", ' ') is no verb
  }
  return out;
}

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;
const WRAPPERS = new Set(['sudo', 'env', 'nohup', 'time', 'exec', 'nice', 'command', 'setsid', 'stdbuf']);

/**
 * A session label: the verb plus its first non-flag argument (`npm run build` → `npm run`,
 * `FOO=1 ./scripts/test.sh --fast x` → `test.sh x`).
 */
export function deriveName(command: string): string {
  let ws = words(command.trim());
  for (let wrapped = false; ws.length > 0; ws = ws.slice(1)) {
    if (ASSIGNMENT.test(ws[0])) continue;
    if (WRAPPERS.has(ws[0])) wrapped = true;
    else if (!(wrapped && ws[0].startsWith('-'))) break; // a wrapper's own flags are not the verb
  }
  if (ws.length === 0) return command.trim().slice(0, 40) || 'sh';
  const verb = ws[0].split('/').pop() || ws[0];
  const arg = ws.slice(1).find((w) => !w.startsWith('-'));
  const name = (arg === undefined ? verb : `${verb} ${arg}`).trim() || 'sh';
  if (name.length <= 60) return name;
  const end = /[\uD800-\uDBFF]/.test(name[58]) ? 58 : 59; // do not cut a surrogate pair in two
  return `${name.slice(0, end)}…`;
}
