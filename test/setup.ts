import fc from 'fast-check';

// CI checks one fixed sample of every property, so a landing never hangs on a lucky draw;
// local runs draw anew each time and keep finding new cases.
if (process.env.CI) fc.configureGlobal({ seed: 20261122 });
