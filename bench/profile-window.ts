import { readFileSync } from 'node:fs';

/**
 * Read a `.cpuprofile` (from `npm run bench -- --cpu-prof DIR`) and say what the main thread did
 * in a window of it: time by function (self and total), and the longest stretches it was busy
 * without a break — what a request arriving then had to wait for. The window is given in µs on
 * the monotonic clock (the `[profile mark]` lines of the tails bench), or is the whole profile.
 *
 *   node dist/bench/profile-window.js FILE.cpuprofile [FROM_US TO_US] [--top N]
 */

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

function main(): void {
  const args = process.argv.slice(2);
  const topAt = args.indexOf('--top');
  const top = topAt >= 0 ? Number(args.splice(topAt, 2)[1]) : 25;
  const [file, fromArg, toArg] = args;
  if (!file) throw new Error('usage: profile-window FILE.cpuprofile [FROM_US TO_US] [--top N]');
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const from = fromArg ? Number(fromArg) : p.startTime;
  const to = toArg ? Number(toArg) : p.endTime;

  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const name = (n: Node) => {
    const f = n.callFrame;
    const where = f.url ? `${f.url.replace(/^.*\/(dist|node_modules)\//, '$1/')}:${f.lineNumber + 1}` : '';
    return `${f.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
  };
  const idle = (n: Node) => n.callFrame.functionName === '(idle)';

  const self = new Map<string, number>();
  const total = new Map<string, number>();
  let t = p.startTime;
  let busyUs = 0;
  let windowUs = 0;
  // A stretch: consecutive busy samples; its cost is split by the frames under the loop's task.
  const stretches: { at: number; us: number; frames: Map<string, number> }[] = [];
  let cur: (typeof stretches)[number] | undefined;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i];
    const dt = p.timeDeltas[i + 1] ?? 0;
    if (t < from || t > to) continue;
    windowUs += dt;
    const leaf = byId.get(p.samples[i])!;
    if (idle(leaf)) {
      if (cur) stretches.push(cur);
      cur = undefined;
      continue;
    }
    busyUs += dt;
    self.set(name(leaf), (self.get(name(leaf)) ?? 0) + dt);
    const seen = new Set<string>();
    const path: string[] = [];
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const k = name(byId.get(id)!);
      path.push(k);
      if (seen.has(k)) continue;
      seen.add(k);
      total.set(k, (total.get(k) ?? 0) + dt);
    }
    cur ??= { at: t, us: 0, frames: new Map() };
    cur.us += dt;
    // The two frames just below the root say which task it was (a timer, a socket read, GC).
    const head = path.reverse().filter((k) => !k.startsWith('(root)')).slice(0, 3).join(' > ') || name(leaf);
    cur.frames.set(head, (cur.frames.get(head) ?? 0) + dt);
  }
  if (cur) stretches.push(cur);

  const ms = (us: number) => (us / 1000).toFixed(2);
  const out: string[] = [];
  out.push(`window ${ms(windowUs)} ms, busy ${ms(busyUs)} ms (${((busyUs / windowUs) * 100).toFixed(1)}%), ${stretches.length} busy stretches`);
  const sorted = [...stretches].sort((a, b) => b.us - a.us);
  const q = (f: number) => sorted[Math.floor(sorted.length * (1 - f))]?.us ?? 0;
  out.push(`stretch length: p50 ${ms(q(0.5))} ms, p90 ${ms(q(0.9))} ms, p99 ${ms(q(0.99))} ms, max ${ms(sorted[0]?.us ?? 0)} ms`);
  out.push('', `longest stretches (at ms into the window):`);
  for (const s of sorted.slice(0, top)) {
    const parts = [...s.frames].sort((a, b) => b[1] - a[1]).slice(0, 3).map(([k, us]) => `${ms(us)} ${k}`);
    out.push(`  ${ms(s.us)} ms at ${ms(s.at - from)}: ${parts.join(' | ')}`);
  }
  const table = (m: Map<string, number>, title: string) => {
    out.push('', title);
    for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) out.push(`  ${ms(us).padStart(9)} ms ${((us / busyUs) * 100).toFixed(1).padStart(5)}%  ${k}`);
  };
  table(self, 'self time');
  table(total, 'total time');
  process.stdout.write(`${out.join('\n')}\n`);
}

main();
