import type { Command } from 'commander';
import { act, EXIT, globalsOf, hasEnded, note, out, printJsonLine, scoped, type GlobalOptions } from '../context.js';
import { eventLine } from '../render.js';
import { EventFeed } from '../feed.js';
import { procctlCommand } from '../../schema/voice.js';

type Event = Record<string, unknown>;

/**
 * Stream the scope's events. With `follow`, until interrupted; without, until no session of the
 * scope is running any more (like `pueue wait`, but showing what happens on the way).
 */
async function streamEvents(g: GlobalOptions, follow: boolean): Promise<number> {
  // Running = (running in the list ∪ started since subscribing) − exited since subscribing; no ordering needed.
  const started = new Set<string>();
  const exited = new Set<string>();
  let listed: Set<string> | undefined;
  let done: (() => void) | undefined;
  const idle = () => listed !== undefined && [...listed, ...started].every((id) => exited.has(id));
  const feed = await EventFeed.open(g, undefined, null);
  try {
    if (!follow) {
      const { sessions } = await feed.call('process', scoped(g, { action: 'list' }));
      listed = new Set((sessions as Event[]).filter((s) => !hasEnded(s.status)).map((s) => String(s.sessionId)));
      feed.track(listed);
    }
    // Through a planned restart the feed reconnects and hands over what each session it had seen did meanwhile.
    feed.followAll((e) => {
      const { subscription: _sub, ...event } = e;
      if (g.json) printJsonLine(event);
      else out(eventLine(event));
      const id = String(event.sessionId);
      if (event.type === 'started') started.add(id);
      if (event.type === 'exited') exited.add(id);
      if (!follow && idle()) done?.();
    });
    if (!follow && idle()) {
      if (listed!.size === 0 && started.size === 0) note(`procctl: no running sessions in this scope; ${procctlCommand(g.scope, 'events', '-f')} waits for new ones`);
      return EXIT.ok;
    }
    const scope = g.scope ?? 'default';
    note(`procctl: watching events of scope "${scope}" ${follow ? 'until interrupted' : 'until no session is running'} (Ctrl-C to stop)`);
    await new Promise<void>((resolve, reject) => {
      done = resolve;
      if (!follow && idle()) resolve();
      void feed.closed.then(reject);
    });
    return EXIT.ok;
  } finally {
    feed.close();
  }
}

export function registerEvents(program: Command): void {
  program
    .command('events')
    .summary("stream the scope's session events, one line each")
    .description(
      'Print session events of the scope as they happen, one line each (started, output, exited, …); with ' +
        '--json one JSON object per line.\n' +
        'Without -f: print events until no session of the scope is running (at once if none is).\n' +
        'With -f: keep printing, including sessions started later, until interrupted (Ctrl-C).',
    )
    .option('-f, --follow', 'keep streaming until interrupted')
    .action(
      act(async (o: { follow?: boolean }, cmd: Command) => streamEvents(globalsOf(cmd), Boolean(o.follow))),
    );
}
