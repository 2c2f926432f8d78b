import { getHeapStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { heapShrinkAvailable, idleReclaimer } from './idle-reclaim.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const committed = () => getHeapStatistics().total_heap_size;

/**
 * Grows the heap as a burst of requests does: objects that live across several young-generation
 * collections make V8 enlarge it (to 32 MiB), and a big live set fills old space; then all of it
 * becomes garbage, which V8 keeps the room for.
 */
function burst(): void {
  let keep: unknown[] = [];
  for (let round = 0; round < 12; round++) {
    keep = [];
    for (let i = 0; i < 150_000; i++) keep.push({ name: `entry-${i}`, size: [i, round] });
  }
  expect(keep.length).toBe(150_000);
}

describe('idle-reclaim', () => {
  it('has its addon on Linux (npm run build compiles it)', () => {
    expect(heapShrinkAvailable).toBe(process.platform === 'linux');
  });

  it('shrinks the heap a burst grew once activity stops, not while it goes on', async () => {
    if (!heapShrinkAvailable) return;
    let shrunkAt = 0;
    const reclaim = idleReclaimer({ idleMs: 150, growthBytes: 8 << 20, onShrink: () => (shrunkAt = Date.now()) });
    try {
      burst();
      const grown = committed();
      // Requests keep ending every 30 ms for 0.6 s: no shrink while they do.
      let lastActivity = 0;
      for (let i = 0; i < 20; i++) {
        reclaim.activity();
        lastActivity = Date.now();
        await sleep(30);
      }
      await expect.poll(() => shrunkAt, { interval: 50, timeout: 10_000 }).toBeGreaterThan(0);
      expect(shrunkAt - lastActivity).toBeGreaterThanOrEqual(140);
      expect(committed()).toBeLessThan(grown - (8 << 20));
    } finally {
      reclaim.close();
    }
  });

  it('leaves a heap that has not grown alone (a trickle of requests costs no collections)', async () => {
    if (!heapShrinkAvailable) return;
    let shrinks = 0;
    const reclaim = idleReclaimer({ idleMs: 50, growthBytes: 256 << 20, onShrink: () => shrinks++ });
    // Made before the burst, as the server's is: the growth counts from here.
    const passing = idleReclaimer({ idleMs: 50, growthBytes: 4 << 20, onShrink: () => shrinks++ });
    try {
      burst();
      for (let i = 0; i < 3; i++) {
        reclaim.activity();
        await sleep(120);
      }
      expect(shrinks).toBe(0);
      // The same growth with a gate it passes: shrunk once, and not again without new growth.
      passing.activity();
      await expect.poll(() => shrinks, { interval: 25, timeout: 10_000 }).toBe(1);
      passing.activity();
      await sleep(200);
      expect(shrinks).toBe(1);
    } finally {
      reclaim.close();
      passing.close();
    }
  });
});
