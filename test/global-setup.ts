import { addonStale, loadAddon } from '../src/base/addon.js';

/**
 * Once before every test file: an addon built from older native sources than the checkout's
 * loads and half works, and the tests then fail far from the cause. Stop here and say it.
 */
export default function checkAddon(): void {
  loadAddon([]);
  const stale = addonStale();
  if (stale) throw new Error(`the tests would run an old native addon: ${stale}`);
}
