/**
 * The server bounds V8's old-generation growth (src/heap-growth.ts): garbage that big answers
 * promote is collected while it is a few MB, not left to pile up to several times the live heap
 * (the WebDAV benchmark's RSS climbed by ~20 MB a round with nothing live behind it).
 */
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliEnv, startServerProcess, tempDataDirs, type ServerProcess } from './clients/process.js';
import { boundHeapGrowth } from '../src/heap-growth.js';

const MODULE = resolve(import.meta.dirname, '../dist/src/heap-growth.js');

/** Peak used heap (bytes) of a child that holds a 20 MB live set and promotes ~15 MB of garbage a round;
 * --predictable makes V8's collections single-threaded and deterministic, so the peaks repeat. */
function peakHeap(bound: boolean): number {
  const script = `
    import v8 from 'node:v8';
    import { boundHeapGrowth } from ${JSON.stringify(MODULE)};
    if (${bound}) boundHeapGrowth([]);
    const live = []; for (let i = 0; i < 2e5; i++) live.push({ i, s: 'x' + i });
    let peak = 0;
    for (let r = 0; r < 15; r++) {
      const held = []; for (let i = 0; i < 150000; i++) held.push({ a: i, b: 'y' + i, c: [i] });
      for (let j = 0; j < 5; j++) { const t = []; for (let i = 0; i < 50000; i++) t.push({ i }); }
      peak = Math.max(peak, v8.getHeapStatistics().used_heap_size);
      held.length = 0;
    }
    console.log(peak, live.length);`;
  const out = execFileSync(process.execPath, ['--predictable', '--input-type=module', '-e', script], { env: { PATH: process.env.PATH ?? '' } });
  return Number(String(out).split(' ')[0]);
}

const dataDirs = tempDataDirs('treegate-heap-');
const servers: ServerProcess[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.child.kill('SIGTERM');
    await s.exited;
  }
  await dataDirs.cleanup();
});

describe('old-generation growth (heap-growth.ts)', () => {
  it('keeps promoted garbage from piling up: the peak heap is well below the unbounded one', () => {
    const unbounded = peakHeap(false);
    const bounded = peakHeap(true);
    expect(unbounded).toBeGreaterThan(100e6); // the workload does pile up garbage without the bound
    expect(bounded).toBeLessThan(unbounded * 0.8);
  });

  it("is set by the server at start (its ready line says so), and an operator's own wins", async () => {
    const started = await startServerProcess(['--data', await dataDirs.next()], cliEnv({ TREEGATE_SFTP_ENABLE: 'false' }));
    servers.push(started);
    expect(started.output()).toMatch(/"heap_growing_percent":20\b.*treegate ready/);
    const own = await startServerProcess(['--data', await dataDirs.next()], cliEnv({ TREEGATE_SFTP_ENABLE: 'false' }), 30_000, [process.execPath, '--heap-growing-percent=50']);
    servers.push(own);
    expect(own.output()).toMatch(/"heap_growing_percent":"operator".*treegate ready/);
  });

  it("leaves an operator's own --heap-growing-percent alone", () => {
    expect(boundHeapGrowth(['--heap-growing-percent=50'])).toBe(false);
    expect(boundHeapGrowth(['--max-old-space-size=512', '--heap_growing_percent=5'])).toBe(false);
  });
});
