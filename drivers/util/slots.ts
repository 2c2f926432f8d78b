/**
 * A counting semaphore: at most `size` jobs run at once, the others wait first come, first served.
 * A waiting job whose signal aborts leaves the queue at once (a client that went away does not keep
 * its place, nor delay those behind it).
 */
import { abortError } from './streams.js';

export class Slots {
  private free: number;
  private readonly waiting: Array<{ grant(): void }> = [];

  constructor(size: number) {
    this.free = size;
  }

  /** Run `fn` in a slot, released when it settles. */
  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.acquire(signal);
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private async acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw abortError(signal);
    if (this.free > 0) return void this.free--;
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.waiting.splice(this.waiting.indexOf(w), 1);
        reject(abortError(signal));
      };
      const w = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(w);
    });
  }

  /** Hand the slot straight to the next waiting job, so a newcomer cannot overtake it. */
  private release(): void {
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.free++;
  }
}

