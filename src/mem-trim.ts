/**
 * Memory freed by big transfers goes back to the system. A large upload passes through many
 * thousands of 64 KiB socket buffers that malloc serves from its heap; glibc keeps the freed pages,
 * and the server's RSS stayed about 20 MiB higher for good after one 1 GiB upload. Once a request
 * that moved more than TRIM_AFTER_BYTES has ended, malloc_trim(0) (native/memtrim) returns them.
 * No addon (not Linux): nothing to do.
 */
import { loadNativeAddon } from './native-addon.js';

export const TRIM_AFTER_BYTES = 64 << 20;

const addon = loadNativeAddon<{ trim(): boolean }>('memtrim');
let pending = false;

/** Whether this process can trim (for tests and the startup log). */
export const memTrimAvailable = addon !== undefined;

/**
 * A transfer of `bytes` has ended: trim if it was a big one, at once and again a little later. The
 * buffers are freed only when the garbage collector has taken their JS objects, which for the last
 * ones of the transfer may come later than its end.
 */
export function transferEnded(bytes: number): void {
  if (!addon || bytes < TRIM_AFTER_BYTES || pending) return;
  pending = true;
  setImmediate(() => addon.trim()).unref();
  setTimeout(() => {
    pending = false;
    addon.trim();
  }, LATER_MS).unref();
}

const LATER_MS = 2000;
