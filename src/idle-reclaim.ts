/**
 * The memory a burst of work took goes back once the server is idle. V8 keeps the heap a burst
 * grew: after a busy spell (a 10,000-entry PROPFIND, runs of uploads) its young generation stays at
 * 32 MiB and the old one keeps its emptied pages, because Node, unlike a browser, never tells V8
 * the process went idle. Measured after the WebDAV bench: RSS 129 MiB, and 81 MiB once V8 got a
 * low-memory notification (native/heapshrink), which took 60-100 ms of the idle process.
 *
 * So every request's end is reported here (`activity`, a counter). Once none has come for
 * `idleMs` and the heap has grown by `growthBytes` since the last time, the heap is shrunk and
 * malloc's free pages trimmed (mem-trim.ts). A steady trickle of requests does not grow the heap,
 * so it costs no collections; an idle server has no timer running. No addon: nothing to do.
 */
import { getHeapStatistics } from 'node:v8';
import { trimMalloc } from './mem-trim.js';
import { loadNativeAddon } from './native-addon.js';

export const IDLE_MS = 2000;
export const GROWTH_BYTES = 16 << 20;

const heapAddon = loadNativeAddon<{ shrink(): void }>('heapshrink');

/** Whether this process can shrink its heap (for tests). */
export const heapShrinkAvailable = heapAddon !== undefined;

export interface IdleReclaimer {
  /** A request (or an SFTP handle) has ended. */
  activity(): void;
  /** Stops the timer (the server is stopping). */
  close(): void;
}

/** The V8 heap's committed size: what the process holds for it. */
const heapCommitted = () => getHeapStatistics().total_heap_size;

export function idleReclaimer(opts: { idleMs?: number; growthBytes?: number; onShrink?: () => void } = {}): IdleReclaimer {
  const idleMs = opts.idleMs ?? IDLE_MS;
  const growthBytes = opts.growthBytes ?? GROWTH_BYTES;
  let ended = 0;
  let timer: NodeJS.Timeout | undefined;
  /** The committed heap after the last shrink (or at start, or the lowest seen since). */
  let baseline = heapCommitted();

  const arm = () => {
    const endedBefore = ended;
    timer = setTimeout(() => {
      timer = undefined;
      if (ended !== endedBefore) return arm(); // still busy: look again after another quiet spell
      if (heapCommitted() - baseline < growthBytes) {
        baseline = Math.min(baseline, heapCommitted());
        return;
      }
      heapAddon!.shrink();
      trimMalloc();
      baseline = heapCommitted(); // what stays is live: the next shrink waits for new growth
      opts.onShrink?.();
    }, idleMs).unref();
  };

  return {
    activity() {
      if (!heapAddon) return;
      ended++;
      if (!timer) arm();
    },
    close() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
