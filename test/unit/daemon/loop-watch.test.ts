import { afterEach, describe, expect, it, vi } from 'vitest';
import { diagnostics, WATCH_UNREAD_MS } from '../../../src/daemon/diagnostics.js';

afterEach(() => {
  vi.useRealTimers();
});

// The watch's timer wakes the daemon's thread a hundred times a second: one look by an operator
// must not keep it running for the daemon's life.
describe("the loop-delay watch of daemon.diagnostics", () => {
  it('runs while it is read, stops once nobody has read it for WATCH_UNREAD_MS, and starts again at the next call', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    expect(diagnostics().eventLoopDelay, 'the first call starts it').toBeNull();
    // Read now and then, each within the time: it keeps running.
    for (let i = 0; i < 3; i++) {
      vi.advanceTimersByTime(WATCH_UNREAD_MS - 1000);
      expect(diagnostics().eventLoopDelay).toMatchObject({ p99: expect.any(Number), count: expect.any(Number) });
    }
    // Unread for the whole time: stopped; the next call starts it again, as the first did.
    vi.advanceTimersByTime(WATCH_UNREAD_MS + 1);
    expect(vi.getTimerCount(), 'no timer of its own left').toBe(0);
    expect(diagnostics().eventLoopDelay).toBeNull();
    expect(diagnostics().eventLoopDelay).toMatchObject({ p99: expect.any(Number) });
  });
});
