import '@xterm/xterm/css/xterm.css';
import './style.css';
import { render } from 'preact';
import { Approvals } from './approvals.js';
import { connect } from './connection.js';
import { useRoute } from './hooks.js';
import { SessionView } from './session.js';
import { Sessions } from './sessions.js';
import { DaemonStatus } from './status.js';

function App() {
  const route = useRoute();
  const m = /^#\/s\/(.+)$/.exec(route);
  return (
    <>
      <header>
        <h1><a href="#/">procctl console</a></h1>
        <DaemonStatus />
      </header>
      <main>
        <Approvals />
        {m ? <SessionView sessionId={decodeURIComponent(m[1])} /> : <Sessions />}
      </main>
    </>
  );
}

connect();
const root = document.getElementById('app')!;
// The placeholder goes: the page renders into an empty element.
root.textContent = '';
render(<App />, root);
