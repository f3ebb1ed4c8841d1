import { afterAll } from 'vitest';
import fc from 'fast-check';

// CI checks one fixed sample of every property, so a landing never hangs on a lucky draw;
// local runs draw anew each time and keep finding new cases.
if (process.env.CI) fc.configureGlobal({ seed: 20261122 });

// Test commands are written for bash (`read -s`, `select`). Where SHELL is unset (CI, systemd)
// the daemons under test would run them with /bin/sh, as SPEC §5 says; the tests about that
// choice set SHELL themselves.
process.env.SHELL = '/bin/bash';

// A daemon a test started and did not stop (its assertion failed before its own stop) is
// stopped, by PID, when its file ends: a failure never leaves a daemon behind.
afterAll(async () => {
  const { stopAllDaemons } = await import('./helpers/daemon.js');
  await stopAllDaemons();
});
