import '@xterm/xterm/css/xterm.css';
import './style.css';
import { render } from 'preact';
import { Approvals } from './approvals.js';
import { History, HistoryStory } from './history.js';
import { connect, state, type State } from './connection.js';
import { useLive, useRoute } from './hooks.js';
import { SessionView } from './session.js';
import { Sessions } from './sessions.js';
import { Shells } from './shells.js';
import { DaemonStatus } from './status.js';

/** `#/s/HOST/ID` names its host; `#/s/ID` (a link from before the fleet view) is the session of that id on whichever host has it. */
function sessionRoute(route: string, live: State): { host: string; sessionId: string } | undefined {
  const m = /^#\/s\/([^/]+)(?:\/([^/]+))?$/.exec(route);
  if (!m) return undefined;
  if (m[2] !== undefined) return { host: decodeURIComponent(m[1]), sessionId: decodeURIComponent(m[2]) };
  const sessionId = decodeURIComponent(m[1]);
  const row = [...live.sessions.values()].find((r) => r.sessionId === sessionId);
  return { host: row?.host ?? [...live.hosts.keys()][0] ?? '', sessionId };
}

/** A session's view; a link from before the fleet view finds its host among the sessions as they come. */
function SessionRoute({ route }: { route: string }) {
  const live = useLive('sessions', 'hosts');
  const s = sessionRoute(route, live)!;
  return <SessionView host={s.host} sessionId={s.sessionId} />;
}

/** What the route shows: a session, the history or one session's story in it, else the sessions. */
function View({ route }: { route: string }) {
  if (sessionRoute(route, state)) return <SessionRoute route={route} />;
  const story = /^#\/history\/([^/]+)\/([^/]+)$/.exec(route);
  if (story) return <HistoryStory host={decodeURIComponent(story[1])} sessionId={decodeURIComponent(story[2])} />;
  if (/^#\/history\/?$/.test(route)) return <History />;
  return (
    <>
      <Shells />
      <Sessions />
    </>
  );
}

/** The page's frame; each view listens to the pushes it shows, so a push redraws only those. */
function App() {
  const route = useRoute();
  const history = route.startsWith('#/history');
  return (
    <>
      <header>
        <h1><a href="#/">procctl console</a></h1>
        <nav aria-label="views">
          <a href="#/" aria-current={history ? undefined : 'page'}>Sessions</a> <a href="#/history" aria-current={history ? 'page' : undefined}>History</a>
        </nav>
        <DaemonStatus />
      </header>
      <main>
        <Approvals />
        <View route={route} />
      </main>
    </>
  );
}

connect();
const root = document.getElementById('app')!;
// The placeholder goes: the page renders into an empty element.
root.textContent = '';
render(<App />, root);
