/** Helpers for the search index tests (not a test file itself). */
import type { TestServer } from './harness.js';
import type { Listing } from '../src/vfs/types.js';

/**
 * Hold the listings of `path` the index build makes (internal context), after the storage answered
 * them, until release(): what a test does meanwhile happens after the listing and before its rows
 * are written.
 */
export function holdListing(ts: TestServer, path: string): { held: () => boolean; release: () => void; restore: () => void } {
  const vfs = ts.running.core.vfs;
  const list = vfs.list.bind(vfs);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let held = false;
  vfs.list = async (ctx, p, o): Promise<Listing> => {
    const l = await list(ctx, p, o);
    if (p === path && ctx.protocol === 'internal') {
      held = true;
      await gate;
    }
    return l;
  };
  return { held: () => held, release, restore: () => void ((vfs.list = list), release()) };
}
