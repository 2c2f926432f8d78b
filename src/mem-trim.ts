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

/** Whether this process can trim (for tests and the startup log). */
export const memTrimAvailable = addon !== undefined;

/**
 * The server's `transferEnded(bytes)`: a transfer of `bytes` has ended; if it was a big one, trim at
 * once and again a little later (the buffers are freed only when the garbage collector has taken
 * their JS objects, which for the last ones of the transfer may come after its end).
 */
export function memTrimmer(laterMs = 2000): (bytes: number) => void {
  let pending = false;
  return (bytes) => {
    if (!addon || bytes < TRIM_AFTER_BYTES || pending) return;
    pending = true;
    setImmediate(() => addon.trim()).unref();
    setTimeout(() => {
      pending = false;
      addon.trim();
    }, laterMs).unref();
  };
}
