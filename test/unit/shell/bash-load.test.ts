import { afterEach, describe, expect, it } from 'vitest';
import { analyze, bashLoading, bashState, loadBash, onBashLoadFailure, setBashLoaderForTest } from '../../../src/shell/bash.js';

/** A failed load of the approval rules' parser is not kept: the next judged request loads it again. */
describe('bash parser load', () => {
  afterEach(() => {
    setBashLoaderForTest(undefined);
    onBashLoadFailure(() => undefined);
  });

  it('retries after a failed load, logs each failure, and says where it is', async () => {
    const failures: string[] = [];
    onBashLoadFailure((err) => failures.push(err.message));
    let calls = 0;
    setBashLoaderForTest(async (real) => {
      calls++;
      if (calls === 1) throw new Error('out of memory');
      return real();
    });
    // First load fails.
    await expect(loadBash()).rejects.toThrow('out of memory');
    expect(bashState()).toBe('failed: out of memory');
    expect(failures).toEqual(['out of memory']);
    // The next request tries again rather than getting the same rejection.
    const again = bashLoading();
    expect(again).toBeDefined();
    expect(bashState()).toBe('loading');
    await again;
    expect(calls).toBe(2);
    expect(bashState()).toBe('ready');
    expect(bashLoading()).toBeUndefined();
    expect(analyze('ls -la').commands[0]?.argv).toEqual(['ls', '-la']);
  });
});
