import { useEffect, useState } from 'preact/hooks';
import { onChange, state, type State } from './connection.js';

/**
 * Re-render when the pushed state changes; given some of its fields, only when one of those
 * changed (each push replaces the field it changes), so a sessions push does not redraw the approvals.
 */
export function useLive(...fields: (keyof State)[]): State {
  const [, setVersion] = useState(state.version);
  useEffect(() => {
    if (!fields.length) return onChange(() => setVersion(state.version));
    let seen = fields.map((f) => state[f]);
    return onChange(() => {
      const now = fields.map((f) => state[f]);
      if (now.every((v, i) => v === seen[i])) return;
      seen = now;
      setVersion(state.version);
    });
  }, []);
  return state;
}

/** The location's hash as a route: `#/s/ID` is a session, anything else the list. */
export function useRoute(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

/** One clock for the whole page: every runtime shown moves in the same task, so in one render. */
const ticking = new Set<(now: number) => void>();
let clock: ReturnType<typeof setInterval> | undefined;
function onTick(fn: (now: number) => void): () => void {
  ticking.add(fn);
  clock ??= setInterval(() => {
    const now = Date.now();
    for (const f of ticking) f(now);
  }, 1000);
  return () => {
    ticking.delete(fn);
    if (ticking.size) return;
    clearInterval(clock);
    clock = undefined;
  };
}

/** A clock for runtimes, ticking once a second; `running` false: no ticks (a finished session's runtime stays). */
export function useNow(running = true): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => (running ? onTick(setNow) : undefined), [running]);
  return now;
}
