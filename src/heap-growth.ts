/**
 * How far V8 lets its old generation grow past the live heap before the next full collection.
 *
 * The server's live heap is small (about 20 MB) and stays so, but big answers pass through it: a
 * 10,000-entry PROPFIND allocates about 40 MB while it holds its listing, and the few MB of that
 * still referenced at a young collection are promoted to the old generation, where they die. V8
 * lets the old generation grow to several times the live size before collecting it, and on a
 * machine with gigabytes of memory nothing else triggers that collection while requests keep
 * coming: the benchmark's RSS climbed by about 20 MB a round (129 → 234 MiB over five rounds) with
 * nothing live behind it, and came back only when the server went idle. A 20% growth step makes
 * the full collections come while that garbage is a few MB; on a 20 MB heap each costs a few
 * milliseconds, most of it marked concurrently.
 *
 * V8 reads this flag each time it sets the next limit, so setting it at start-up applies to the
 * whole run. An operator's own `node --heap-growing-percent=N` wins (NODE_OPTIONS does not take V8
 * flags like it, so the command line is the only place).
 */
import { setFlagsFromString } from 'node:v8';

export const HEAP_GROWING_PERCENT = 20;

export function boundHeapGrowth(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.some((a) => /^--heap[-_]growing[-_]percent\b/.test(a))) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
