import { afterEach, describe, expect, it, vi } from 'vitest';
import { sleep } from './tool.js';

describe('sleep', () => {
  afterEach(() => vi.useRealTimers());

  it('waits the whole time even past what one timer holds (a 35,792-minute seed time)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const ms = 35_792 * 60_000; // > 2^31 - 1: a single setTimeout fires after 1 ms
    let done = false;
    const p = sleep(ms, new AbortController().signal).then(() => (done = true));
    await vi.advanceTimersByTimeAsync(2 ** 31);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(ms - 2 ** 31 - 1);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await p;
    expect(done).toBe(true);
  });

  it('ends early, rejecting with the reason, when the signal aborts in any part of a long wait', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const ac = new AbortController();
    const p = sleep(3 * 2 ** 31, ac.signal);
    const settled = p.then(() => 'resolved', (e: unknown) => e);
    await vi.advanceTimersByTimeAsync(2 ** 31 + 5);
    ac.abort(new Error('canceled'));
    expect(await settled).toEqual(new Error('canceled'));
    expect(vi.getTimerCount()).toBe(0);
  });
});
