import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, withClient } from '../context.js';
import { bytes, duration } from '../render.js';

export function registerStatus(program: Command): void {
  program
    .command('status')
    .summary('show whether the daemon is up, and its session counts')
    .description('Show the daemon\'s version, pid, uptime, socket and session counts (all scopes), the config file in use and whether its last reload was refused, how jobs are started, the daemon\'s restarts (planned and after a crash, the last one, the sessions kept and lost), and what the audit trail and the OpenTelemetry export hold.')
    .action(
      act(async (_o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const r = await withClient(g, (c) => c.call('daemon.status'));
        if (g.json) {
          printJson(r);
          return EXIT.ok;
        }
        const lines = [
          `procctld ${r.version} (pid ${r.pid}), up ${duration(Number(r.uptimeMs))}${r.closing ? ', shutting down' : ''}`,
          `socket:   ${r.socket}`,
          `sessions: ${r.sessions?.running ?? 0} running, ${r.sessions?.finished ?? 0} finished`,
        ];
        if (r.config) {
          const reload = r.config.lastReload;
          const last = !reload ? '' : reload.ok ? `; reloaded at ${reload.at}` : `; the reload at ${reload.at} was REFUSED, the previous config is in use: ${reload.error}`;
          lines.push(`config:   ${r.config.file ?? 'none (defaults and the environment)'}${last}`);
        }
        if (r.node) lines.push(`node:     ${r.node}`);
        if (r.spawner) lines.push(`spawner:  ${r.spawner}${r.spawnerReason ? ` (${r.spawnerReason})` : ''}`);
        if (r.state) lines.push(`state:    ${r.state.dir}${r.state.writable ? '' : `, NOT WRITABLE: ${r.state.error}`}`);
        if (r.sandbox) {
          const can = r.sandbox.available ? 'bubblewrap works here' : `bubblewrap cannot run here: ${r.sandbox.reason ?? 'no reason given'}`;
          lines.push(`sandbox:  ${r.sandbox.mode} (${can})`);
          for (const c of (r.sandbox.credentials ?? []) as { name: string; hosts: string[]; header: string; scopes: string[] | string }[]) {
            lines.push(`  credential ${c.name}: ${c.hosts.join(', ')} in ${c.header}, for ${Array.isArray(c.scopes) ? `scope(s) ${c.scopes.join(', ')}` : c.scopes}`);
          }
        }
        if (r.cgroups) lines.push(`cgroups:  ${r.cgroups.mode} (${r.cgroups.reason})`);
        const used = r.cgroups?.running;
        if (used) lines.push(`in use:   ${used.processes} process(es) of ${used.sessions} running session(s), ${bytes(used.memoryBytes)} memory, ${duration(used.cpuMs)} CPU so far`);
        if (r.audit) {
          const a = r.audit;
          const trail = a.enabled ? `${bytes(a.bytes)} in ${a.files} file(s), last record #${a.records}` : 'off (audit.enabled is false)';
          const faults = a.writable === false ? `, NOT WRITABLE: ${a.error}` : '';
          const lost = a.lostRecords ? `, ${a.lostRecords} record(s) lost` : '';
          const v = a.lastVerify ? `; last verify ${a.lastVerify.at}: ${a.lastVerify.ok ? 'whole' : `NOT whole at ${a.lastVerify.firstBad?.file}:${a.lastVerify.firstBad?.line} (${a.lastVerify.firstBad?.why})`}` : '';
          lines.push(`audit:    ${trail}${faults}${lost}${v}`);
        }
        if (r.telemetry) {
          const t = r.telemetry;
          const failed = t.lastError ? `; last failure ${t.lastError.at} (${t.lastError.signal}): ${t.lastError.message}` : '';
          const sent = `${t.exported} span(s) sent, ${t.dropped} dropped; ${t.metrics?.exported ?? 0} metrics reading(s) sent, ${t.metrics?.dropped ?? 0} dropped${failed}`;
          lines.push(`otlp:     ${t.endpoint === null ? 'off (telemetry.otlp.endpoint is not set)' : `${t.endpoint}: ${sent}`}`);
        }
        if (r.restarts) {
          const x = r.restarts;
          const last = x.lastAt ? `; last ${x.lastAt}${x.lastMs !== null && x.lastMs !== undefined ? `, serving again after ${x.lastMs} ms` : ''}` : '';
          lines.push(`restarts: ${x.planned} planned, ${x.crash} after a crash${last}; ${x.adopted} session(s) kept, ${x.lost} lost`);
        }
        if (r.env?.withheld !== undefined) lines.push(`env:      ${r.env.withheld} inherited variable(s) withheld from sessions`);
        out(lines.join('\n'));
        return EXIT.ok;
      }),
    );
}
