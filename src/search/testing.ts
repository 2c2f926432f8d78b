/**
 * Test support for the search tests (imported only by *.test.ts): a VFS core over Memory storages,
 * its settings with search switched on, and a SearchService over a data dir that can outlive it
 * (to test a restart).
 */
import pino from 'pino';
import { PERM } from '../auth/principal.js';
import { Settings } from '../settings/settings.js';
import { ctx, makeCore, principal, type TestCore } from '../vfs/testing.js';
import type { Vfs } from '../vfs/vfs.js';
import { SearchService } from './service.js';

export const ADMIN = ctx(principal(0x3fff));
/** A user with every write bit but neither see-hidden nor skip-password. */
export const USER_BITS = 0xfff & ~(PERM.SEE_HIDDEN | PERM.NO_PASSWORD);

export interface SearchRig {
  core: TestCore;
  settings: Settings;
  service: SearchService;
  /** A fresh service on the same data dir (the old one must be closed first), optionally over another VFS view. */
  restart(vfs?: Vfs): SearchService;
  cleanup(): Promise<void>;
}

export async function makeRig(values: Record<string, string> = {}): Promise<SearchRig> {
  const core = await makeCore();
  const settings = await Settings.load(core.store, 'test');
  await settings.save({ search_index: 'database', ...values });
  const make = (vfs: Vfs = core.vfs) => {
    const s = new SearchService({ dataDir: core.dir, settings, vfs, mounts: core.mounts, rules: core.rules, log: pino({ level: 'silent' }), syncMs: 100 });
    s.start();
    return s;
  };
  const rig: SearchRig = {
    core, settings, service: make(),
    restart: (vfs) => (rig.service = make(vfs)),
    cleanup: async () => {
      await rig.service.close();
      await core.cleanup();
    },
  };
  return rig;
}

/**
 * The VFS with the listing of `path` held until `open()` (or until the caller's signal aborts, as a
 * paused build's does): a build can then be caught half done.
 */
export function gatedVfs(vfs: Vfs, path: string): { vfs: Vfs; open: () => void } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const list: Vfs['list'] = async (c, p, o) => {
    if (p === path) {
      await new Promise<void>((resolve, reject) => {
        void gate.then(resolve);
        if (c.signal?.aborted) reject(new Error('aborted'));
        c.signal?.addEventListener('abort', () => reject(new Error('aborted')));
      });
    }
    return vfs.list(c, p, o);
  };
  const view = new Proxy(vfs, {
    get: (t, k) => (k === 'list' ? list : typeof Reflect.get(t, k) === 'function' ? (Reflect.get(t, k) as (...a: unknown[]) => unknown).bind(t) : Reflect.get(t, k)),
  });
  return { vfs: view, open };
}

/** Poll until `cond` holds (bounded). */
export async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Poll until the build job is over (bounded). */
export async function built(s: SearchService, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (s.running) {
    if (Date.now() > until) throw new Error('index build did not finish in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
