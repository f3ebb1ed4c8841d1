/** Split a command line into words, honouring simple quotes; good enough for a label. */
function words(command: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;&|()<>]+)|([;&|()<>]+)/g;
  for (let m = re.exec(command); m; m = re.exec(command)) {
    if (m[4] !== undefined) {
      if (out.length > 0) break; // the first simple command ends at an operator
      continue;
    }
    out.push(m[1] ?? m[2] ?? m[3]);
  }
  return out;
}

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;
const WRAPPERS = new Set(['sudo', 'env', 'nohup', 'time', 'exec', 'nice', 'command']);

/**
 * A session label: the verb plus its first non-flag argument (`npm run build` → `npm run`,
 * `FOO=1 ./scripts/test.sh --fast x` → `test.sh x`).
 */
export function deriveName(command: string): string {
  let ws = words(command.trim());
  while (ws.length > 0 && (ASSIGNMENT.test(ws[0]) || WRAPPERS.has(ws[0]))) ws = ws.slice(1);
  if (ws.length === 0) return command.trim().slice(0, 40) || 'sh';
  const verb = ws[0].split('/').pop() || ws[0];
  const arg = ws.slice(1).find((w) => !w.startsWith('-'));
  const name = arg === undefined ? verb : `${verb} ${arg}`;
  return name.length > 60 ? `${name.slice(0, 59)}…` : name;
}
