import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadNativeAddon } from './native-addon.js';
import { memTrimAvailable } from './mem-trim.js';

/** The RSS of this process's malloc heap (the [heap] mapping), in KiB. */
function heapRssKiB(): number {
  const lines = readFileSync('/proc/self/smaps', 'utf8').split('\n');
  const at = lines.findIndex((l) => l.endsWith('[heap]'));
  if (at < 0) return 0;
  const rss = lines.slice(at + 1).find((l) => l.startsWith('Rss:'));
  return Number(/(\d+)/.exec(rss ?? '')?.[1] ?? 0);
}

describe('mem-trim', () => {
  it('has its addon on Linux (npm run build compiles it)', () => {
    expect(memTrimAvailable).toBe(process.platform === 'linux');
  });

  it('gives freed malloc pages back to the system', async () => {
    const addon = loadNativeAddon<{ trim(): boolean }>('memtrim');
    if (process.platform !== 'linux') return expect(addon).toBeUndefined();
    // Node's zlib state lives in malloc's heap; many small streams, then all of them freed.
    const { createDeflate } = await import('node:zlib');
    const streams = Array.from({ length: 400 }, () => createDeflate());
    const grown = heapRssKiB();
    for (const s of streams) s.close();
    // The streams' native state is freed as their handles close, which a loaded machine (CI with
    // other test files running) may take a while to get to: trim again until it shows, or time out.
    await expect.poll(() => (addon!.trim(), heapRssKiB()), { interval: 50, timeout: 5000 }).toBeLessThan(grown);
  });
});
