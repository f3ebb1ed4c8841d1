import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchOptions } from './lib/options.js';
import { BenchDaemon } from './lib/daemon.js';
import { cpuMs } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { median, now, p99, round } from './lib/stats.js';
import { compileRules, decide, type ApprovalRuleConfig } from '../src/policy/approvals.js';
import { parseConfig } from '../src/config/load.js';
import { loadBash } from '../src/shell/bash.js';
import { judgeCommand } from '../src/tools/approval/judge.js';

/**
 * Twenty rules of the kind a team writes, none of which matches `true` (the timed command).
 * The last one matches the probe command, so the bench can check the rules are loaded.
 */
const PROBE = 'echo procctl-bench-probe';
const RULES: ApprovalRuleConfig[] = [
  { match: '\\brm\\s+-[a-zA-Z]*r[a-zA-Z]*f', action: 'deny', reason: 'recursive forced delete' },
  { match: '^git\\s+push\\b.*--force', action: 'ask', reason: 'force push' },
  { match: '(?i)\\bdeploy\\b', action: 'ask', reason: 'changes production' },
  { match: '\\bmkfs(\\.\\w+)?\\b', action: 'deny', reason: 'formats a disk' },
  { match: '\\bdd\\s+.*\\bof=/dev/', action: 'deny', reason: 'writes a device' },
  { match: '\\b(shutdown|reboot|poweroff|halt)\\b', action: 'deny', reason: 'stops the host' },
  { match: '\\bsystemctl\\s+(stop|disable|mask)\\b', action: 'ask' },
  { match: '\\bkubectl\\s+(delete|drain|cordon)\\b', action: 'ask', reason: 'cluster change' },
  { match: '\\bterraform\\s+(apply|destroy)\\b', action: 'ask', reason: 'infrastructure change' },
  { match: '(?i)\\bdrop\\s+(table|database)\\b', action: 'deny', reason: 'drops data' },
  { match: '\\bchmod\\s+-R\\s+777\\b', action: 'deny' },
  { match: '\\bcurl\\b[^|]*\\|\\s*(ba)?sh\\b', action: 'ask', reason: 'runs a downloaded script' },
  { match: '\\bnpm\\s+publish\\b', action: 'ask', reason: 'publishes a package' },
  { match: '\\bdocker\\s+(rm|rmi|system\\s+prune)\\b', action: 'ask' },
  { match: '>\\s*/etc/', action: 'deny', reason: 'writes /etc' },
  { match: '\\bsudo\\b', action: 'ask', reason: 'elevates' },
  { match: '\\bgit\\s+reset\\s+--hard\\b', action: 'ask' },
  { match: '\\bcrontab\\s+-r\\b', action: 'deny' },
  { match: '(?i)\\baws\\s+s3\\s+rm\\b', action: 'ask' },
  { match: 'procctl-bench-probe', action: 'deny', reason: 'the bench checks the rules are loaded' },
];

/**
 * Approvals cost nothing when no rule matches (issue 9): the exec round trip of `true` on a
 * daemon with twenty rules, none matching, against a daemon with none, in the same run. Two
 * daemons side by side, one exec on each alternately (which goes first alternating too), so
 * load on the shared machine falls on both alike; the rules move from one daemon to the other
 * between rounds (a config reload), so neither daemon's own luck counts as the rules'. Also the
 * rules' own cost, timed in-process.
 */
export async function approvals(opts: BenchOptions): Promise<Metric[]> {
  const iterations = opts.quick ? 60 : 300;
  const warmup = opts.quick ? 10 : 40;
  const evenRounds = opts.rounds + (opts.rounds % 2);
  const daemons = [await BenchDaemon.start({}, {}), await BenchDaemon.start({}, {})];
  opts.log(
    `approvals: exec \`true\` with ${RULES.length} rules (none matching) vs none; ${evenRounds} rounds x ${iterations} iterations (+${warmup} warm-up), alternating; ` +
      'the rules change daemon at each round',
  );
  const clients = await Promise.all(daemons.map((d) => d.client()));
  const rounds: { plain: number[]; ruled: number[]; plainCpu: number; ruledCpu: number; plainFresh: number[]; ruledFresh: number[] }[] = [];
  try {
    /** Give daemon `i` the rules and the other none (SIGHUP reloads the config); check with the probe. */
    const rulesOn = async (i: number) => {
      for (const [j, d] of daemons.entries()) {
        writeFileSync(join(d.env.XDG_CONFIG_HOME!, 'procctl', 'config.json'), JSON.stringify(j === i ? { approvals: { rules: RULES } } : {}));
        process.kill(d.pid, 'SIGHUP');
      }
      for (const [j, c] of clients.entries()) {
        const want = j === i ? 'denied' : 'completed';
        const deadline = Date.now() + 10_000;
        for (;;) {
          const probe = await c.call('exec', { command: PROBE, yieldMs: 10_000 });
          await c.call('process', { action: 'clear', sessionId: probe.sessionId });
          if (probe.status === want) break;
          if (Date.now() > deadline) throw new Error(`the config reload did not take: ${PROBE} answered ${probe.status}, expected ${want}`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    };
    const exec = async (c: (typeof clients)[number], command = 'true') => {
      const t0 = now();
      const r = await c.call('exec', { command });
      const ms = now() - t0;
      if (r.status !== 'completed' || r.exitCode !== 0) throw new Error(`exec ${command} answered ${JSON.stringify(r).slice(0, 300)}`);
      await c.call('process', { action: 'clear', sessionId: r.sessionId });
      return ms;
    };
    // An even number of rounds, so each daemon has the rules as often as the other.
    for (let r = 0; r < evenRounds; r++) {
      await rulesOn(r % 2);
      const [ruled, plain] = r % 2 === 0 ? daemons : [daemons[1], daemons[0]];
      const [b, a] = r % 2 === 0 ? clients : [clients[1], clients[0]];
      const s = { plain: [] as number[], ruled: [] as number[], plainCpu: 0, ruledCpu: 0, plainFresh: [] as number[], ruledFresh: [] as number[] };
      let cpuA = 0;
      let cpuB = 0;
      for (let i = 0; i < warmup + iterations; i++) {
        if (i === warmup) {
          cpuA = cpuMs(plain.pid);
          cpuB = cpuMs(ruled.pid);
        }
        const plainFirst = i % 2 === 0;
        const x = plainFirst ? await exec(a) : 0;
        const y = await exec(b);
        const z = plainFirst ? x : await exec(a);
        // A line neither daemon has judged before (a comment of its own): the parse and the rules paid in full.
        const fresh = `true # ${r}-${i}`;
        const u = plainFirst ? await exec(a, fresh) : 0;
        const v = await exec(b, fresh);
        const w = plainFirst ? u : await exec(a, fresh);
        if (i >= warmup) {
          s.plain.push(z);
          s.ruled.push(y);
          s.plainFresh.push(w);
          s.ruledFresh.push(v);
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
      s.plainCpu = (cpuMs(plain.pid) - cpuA) / iterations;
      s.ruledCpu = (cpuMs(ruled.pid) - cpuB) / iterations;
      rounds.push(s);
      opts.log(
        `  round ${r + 1}: median ${round(median(s.ruled), 3)} ms with rules vs ${round(median(s.plain), 3)} ms without (p99 ${round(p99(s.ruled), 2)} vs ${round(p99(s.plain), 2)} ms); ` +
          `a line never judged before ${round(median(s.ruledFresh), 3)} vs ${round(median(s.plainFresh), 3)} ms; ` +
          `CPU per exec + clear ${round(s.ruledCpu, 2)} vs ${round(s.plainCpu, 2)} ms`,
      );
    }
  } finally {
    for (const c of clients) c.close();
    await Promise.all(daemons.map((d) => d.stop()));
  }

  // The rules alone: what `decide` costs for a command no rule matches, in this process.
  const compiled = compileRules(RULES);
  const commands = { '`true`': 'true', 'a 200-character command': `cd /srv/app && ${'make -j4 build test lint '.repeat(8)}`.slice(0, 200) };
  const decideUs: Record<string, number> = {};
  const n = opts.quick ? 2000 : 20_000;
  for (const command of Object.values(commands)) {
    if (decide(compiled, command, 'default') !== undefined) throw new Error(`a bench rule matches ${command}`);
    for (let i = 0; i < n; i++) decide(compiled, command, 'default');
  }
  for (const [label, command] of Object.entries(commands)) {
    const t0 = now();
    for (let i = 0; i < n; i++) decide(compiled, command, 'default');
    decideUs[label] = ((now() - t0) / n) * 1000;
  }

  // The whole judgement an exec with rules pays: parse with tree-sitter-bash, then judge each part.
  await loadBash();
  const policy = parseConfig({ approvals: { rules: RULES } }).approvals;
  const judgeUs: Record<string, number> = {};
  // The judgement of a line judged before is kept (tools/approval/judge.ts): each timed line here is new.
  for (const [label, command] of Object.entries(commands)) {
    for (let i = 0; i < n / 10; i++) judgeCommand(policy, `${command} #w${i}`, 'default');
    const t0 = now();
    for (let i = 0; i < n; i++) judgeCommand(policy, `${command} #${i}`, 'default');
    judgeUs[label] = ((now() - t0) / n) * 1000;
  }
  const t0 = now();
  for (let i = 0; i < n; i++) judgeCommand(policy, 'true', 'default');
  const keptUs = ((now() - t0) / n) * 1000;

  const ratios = rounds.map((s) => median(s.ruled) / median(s.plain));
  const freshRatios = rounds.map((s) => median(s.ruledFresh) / median(s.plainFresh));
  const ratiosP99 = rounds.map((s) => p99(s.ruled) / p99(s.plain));
  const med = (f: (s: (typeof rounds)[number]) => number) => median(rounds.map(f));
  return [
    {
      bench: 'approvals',
      name: `exec round trip, ${RULES.length} rules none matching ÷ no rules`,
      value: median(ratios),
      unit: 'x',
      target: { op: '<=', value: 1.05 },
      rounds: ratios.map((x) => round(x, 3)),
      detail: `median ${round(med((s) => median(s.ruled)), 3)} vs ${round(med((s) => median(s.plain)), 3)} ms; p99 ratio ${round(median(ratiosP99), 3)} (${round(med((s) => p99(s.ruled)), 2)} vs ${round(med((s) => p99(s.plain)), 2)} ms); two daemons side by side, alternating, the rules moving between them at each round; the same line each time, its judgement kept`,
    },
    {
      bench: 'approvals',
      name: `exec round trip of a line never judged before, ${RULES.length} rules none matching ÷ no rules`,
      value: median(freshRatios),
      unit: 'x',
      rounds: freshRatios.map((x) => round(x, 3)),
      detail: `median ${round(med((s) => median(s.ruledFresh)), 3)} vs ${round(med((s) => median(s.plainFresh)), 3)} ms; \`true # N\`, a comment of its own each time: the parse and the rules paid in full`,
    },
    {
      bench: 'approvals',
      name: `matching ${RULES.length} rules that do not match, per exec`,
      value: decideUs['`true`'],
      unit: 'us',
      detail:
        `decide() in-process: ${Object.entries(decideUs).map(([k, us]) => `${round(us, 2)} µs for ${k}`).join(', ')}; ` +
        `daemon CPU per exec + clear ${round(med((s) => s.ruledCpu), 2)} ms with rules vs ${round(med((s) => s.plainCpu), 2)} ms without`,
    },
    {
      bench: 'approvals',
      name: `parsing and judging a command with ${RULES.length} rules, per exec`,
      value: judgeUs['`true`'],
      unit: 'us',
      detail: `judgeCommand() in-process of lines not judged before (tree-sitter-bash parse + every part judged): ${Object.entries(judgeUs).map(([k, us]) => `${round(us, 1)} µs for ${k}`).join(', ')}; a line judged before ${round(keptUs, 2)} µs`,
    },
  ];
}
