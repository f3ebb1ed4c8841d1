import { useEffect, useState } from 'preact/hooks';
import { onChange, state, type State } from './connection.js';

/** Re-render when the pushed state changes. */
export function useLive(): State {
  const [, setVersion] = useState(state.version);
  useEffect(() => onChange(() => setVersion(state.version)), []);
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

/** A clock for runtimes, ticking once a second. */
export function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return now;
}
