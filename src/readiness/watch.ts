import { resolve } from 'node:path';
import { compilePattern } from '../config/pattern.js';
import type { WaitFor } from '../schema/exec.js';
import type { Session } from '../session/session.js';
import { watchLines } from './lines.js';
import { fileExists, httpAnswers, portAnswers, probes } from './probes.js';

/**
 * Watch a running session until what it waits for holds, then mark it ready. An output pattern
 * is matched against each line as it is captured; a port, a URL or a file is probed on the
 * daemon's one probe timer, backing off, and never after the session ended.
 */
export function watchReadiness(session: Session, w: WaitFor, cwd: string): void {
  if (!session.running) return;
  if ('output' in w) {
    const re = compilePattern(w.output);
    const stop = watchLines(session, (line, stream) => {
      if (!re.test(line)) return;
      stop();
      session.markReady({ line, stream });
    });
    return;
  }
  const check =
    'port' in w ? () => portAnswers(w.port, w.host) : 'http' in w ? () => httpAnswers(new URL(w.http), w.status) : () => fileExists(resolve(cwd, w.file));
  const stop = probes.add(check, () => session.markReady());
  void session.finished.then(stop);
}
