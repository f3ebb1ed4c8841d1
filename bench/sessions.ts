import type { BenchOptions } from './lib/options.js';
import { BenchDaemon } from './lib/daemon.js';
import { bareRpc } from './lib/floor.js';
import { startSleepers } from './lib/sessions.js';
import { alive, liveProcesses, memoryKb } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { median, now, p99, round, sleep } from './lib/stats.js';


/**
 * Benchmark 3: many running sessions in one scope. Starts `sleep 600` sessions (each in a cgroup
 * of its own where the host gives them), times `process list` and `process poll` round trips on
 * one persistent connection (with `daemon.status`, a request that does little work, beside
 * them), samples the daemon's RSS, then kills them all and checks by pid that every process is
 * gone. Each list is followed by the same request to a bare server answering the bytes the
 * daemon's list gave (bench/lib/bare-rpc.ts): the floor of the transport and the client alone.
 */
export async function sessions(opts: BenchOptions): Promise<Metric[]> {
  const count = opts.quick ? 200 : 1000;
  const listCalls = opts.quick ? 100 : 400;
  const pollCalls = opts.quick ? 500 : 2000;
  const daemon = await BenchDaemon.start({ PROCCTL_MAX_SESSIONS: String(count * 2) });
  const client = await daemon.client();
  opts.log(`sessions: ${count} x \`sleep 600\` (background); ${opts.rounds} rounds of ${listCalls} list, ${pollCalls} poll, ${pollCalls} daemon.status`);
  const ids: string[] = [];
  const pids = new Set<number>();
  const rss: number[] = [];
  const sampleRss = () => rss.push(memoryKb(daemon.pid)?.rss ?? Number.NaN);
  const rounds: { list: number[]; bare: number[]; listParsed: number[]; poll: number[]; status: number[] }[] = [];
  let startMs = 0;
  let killMs = Number.NaN;
  let stallMs = 0;
  let listBytes = 0;
  let killed = 0;
  let leftovers: number[] = [];
  let rssIdleKb = 0;
  let helperKb = 0;
  let floor: Awaited<ReturnType<typeof bareRpc>> | undefined;
  const cgroups = (await client.call('daemon.status')).cgroups;
  try {
    rssIdleKb = memoryKb(daemon.pid)!.rss;
    const t0 = now();
    await startSleepers(client, count, ids, pids);
    startMs = now() - t0;
    opts.log(`  started ${ids.length} sessions in ${round(startMs / 1000, 1)} s; RSS ${mb(memoryKb(daemon.pid)!.rss)} MB; cgroups ${cgroups.mode} (${cgroups.reason})`);
    await sleep(500);
    sampleRss();
    helperKb = daemon.helpers.reduce((sum, pid) => sum + (memoryKb(pid)?.rss ?? 0), 0);

    for (let r = 0; r < opts.rounds; r++) {
      const s = { list: [] as number[], bare: [] as number[], listParsed: [] as number[], poll: [] as number[], status: [] as number[] };
      for (let i = 0; i < 20; i++) await client.call('process', { action: 'list' });
      if (!floor) {
        const sample = await client.call('process', { action: 'list' });
        listBytes = JSON.stringify(sample).length;
        floor = await bareRpc(sample);
        for (let i = 0; i < 20; i++) await floor.client.call('process', { action: 'list' });
      }
      for (let i = 0; i < listCalls; i++) {
        const t = await client.timed('process', { action: 'list' });
        if (t.result.sessions.length !== count) throw new Error(`list returned ${t.result.sessions.length} sessions, expected ${count}`);
        s.list.push(t.receivedMs);
        s.listParsed.push(t.parsedMs);
        s.bare.push((await floor.client.timed('process', { action: 'list' })).receivedMs);
      }
      sampleRss();
      for (let i = 0; i < 100; i++) await client.call('process', { action: 'poll', sessionId: ids[i % ids.length] });
      for (let i = 0; i < pollCalls; i++) {
        const t = await client.timed('process', { action: 'poll', sessionId: ids[(i * 7919) % ids.length] });
        if (t.result.status !== 'running') throw new Error(`poll answered ${JSON.stringify(t.result).slice(0, 200)}`);
        s.poll.push(t.receivedMs);
        const st = await client.timed('daemon.status');
        s.status.push(st.receivedMs);
      }
      sampleRss();
      rounds.push(s);
      opts.log(
        `  round ${r + 1}: list p50 ${round(median(s.list), 2)} / p99 ${round(p99(s.list), 2)} ms (parsed p99 ${round(p99(s.listParsed), 2)}; bare server p50 ${round(median(s.bare), 2)} / p99 ${round(p99(s.bare), 2)} ms), ` +
          `poll p50 ${round(median(s.poll), 3)} / p99 ${round(p99(s.poll), 3)} ms, status p99 ${round(p99(s.status), 3)} ms; RSS ${mb(rss[rss.length - 1])} MB`,
      );
    }

    // While the kill-all runs, a second client checks that the daemon still answers.
    const probe = await daemon.client();
    let probing = true;
    const probeLoop = (async () => {
      while (probing) {
        const t = await probe.timed('daemon.status');
        stallMs = Math.max(stallMs, t.receivedMs);
        await sleep(50);
      }
    })();
    const tk = now();
    const res = await client.call('process', { action: 'kill', all: true });
    killMs = now() - tk;
    probing = false;
    await probeLoop;
    probe.close();
    killed = res.sessions?.length ?? 0;
    const notEnded = (res.sessions ?? []).filter((s: any) => s.status === 'running');
    if (notEnded.length) throw new Error(`kill all left ${notEnded.length} sessions running`);
    leftovers = [...pids].filter(alive).concat(liveProcesses({ pgrps: pids }).map((p) => p.pid));
    leftovers = [...new Set(leftovers)];
    opts.log(`  kill all: ${killed} sessions in ${round(killMs, 0)} ms (slowest daemon.status meanwhile ${round(stallMs, 0)} ms); ${leftovers.length} processes left`);
  } finally {
    client.close();
    floor?.client.close();
    await floor?.stop();
    await daemon.stop();
    // Whatever the outcome, nothing the bench started may outlive it: check by pid.
    const survivors = liveProcesses({ pgrps: pids }).map((p) => p.pid);
    for (const pid of survivors) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    if (survivors.length) opts.log(`  ! ${survivors.length} session processes outlived the daemon and were killed by pid`);
  }

  const list = rounds.map((s) => p99(s.list));
  const bare = rounds.map((s) => p99(s.bare));
  const vsBare = rounds.map((s) => p99(s.list) / p99(s.bare));
  const listParsed = rounds.map((s) => p99(s.listParsed));
  const poll = rounds.map((s) => p99(s.poll));
  const status = rounds.map((s) => p99(s.status));
  const peak = Math.max(...rss);
  return [
    {
      bench: 'sessions',
      name: `process list p99 (${count} sessions)`,
      value: median(list),
      unit: 'ms',
      target: { op: '<', value: 5 },
      rounds: list.map((v) => round(v, 3)),
      detail: `median ${round(median(rounds.map((s) => median(s.list))), 2)} ms; response ${Math.round(listBytes / 1024)} kB; p99 incl. client JSON.parse ${round(median(listParsed), 2)} ms; daemon.status p99 ${round(median(status), 3)} ms; cgroups ${cgroups.mode}`,
    },
    {
      bench: 'sessions',
      name: `process list p99 / a bare server answering the same bytes (${count} sessions)`,
      value: median(vsBare),
      unit: 'x',
      target: { op: '<=', value: 1.5 },
      rounds: vsBare.map((v) => round(v, 3)),
      detail:
        `list p99 ${round(median(list), 2)} ms vs bare p99 ${round(median(bare), 2)} ms; p50 ${round(median(rounds.map((s) => median(s.list))), 2)} vs ${round(median(rounds.map((s) => median(s.bare))), 2)} ms; ` +
        `calls alternate, ${listCalls} each per round; sessions in cgroups: ${cgroups.mode}${cgroups.mode === 'none' ? '' : ` (kill by ${cgroups.kill}; memory from ${cgroups.controllers.memory ?? '/proc'})`}`,
    },
    {
      bench: 'sessions',
      name: 'process poll p99',
      value: median(poll),
      unit: 'ms',
      target: { op: '<', value: 1 },
      rounds: poll.map((v) => round(v, 3)),
      detail: `median ${round(median(rounds.map((s) => median(s.poll))), 3)} ms; ratio to daemon.status p99 ${round(median(poll) / median(status), 2)}x`,
    },
    {
      bench: 'sessions',
      name: `daemon RSS with ${count} running`,
      value: peak / 1024,
      unit: 'MB',
      target: { op: '<', value: 200 },
      rounds: rss.map((v) => round(v / 1024, 1)),
      detail: `highest VmRSS sampled; idle daemon ${mb(rssIdleKb)} MB, ${round((peak - rssIdleKb) / count, 1)} kB per session; start-up of all took ${round(startMs / 1000, 1)} s` +
        (daemon.helpers.length ? `; not counted: ${daemon.helpers.length} helper process(es), ${mb(helperKb)} MB` : ''),
    },
    {
      bench: 'sessions',
      name: `kill all: duration (${count} sessions)`,
      value: killMs,
      unit: 'ms',
      detail: `one process {action:"kill", all:true}; slowest daemon.status from a second connection meanwhile: ${round(stallMs, 0)} ms`,
    },
    {
      bench: 'sessions',
      name: 'kill all: processes left',
      value: leftovers.length,
      unit: '',
      target: { op: '==', value: 0 },
      detail: `${killed} sessions reported stopped; checked by pid and by process group`,
    },
  ];
}


const mb = (kb: number) => Math.round(kb / 1024);
