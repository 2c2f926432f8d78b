import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Driver, DriverDefinition, Obj } from '../../drivers/types.js';
import { memoryDefinition } from '../../drivers/memory/index.js';
import { ListingCache, SWEEP_EVERY } from './cache.js';
import { body, ctx, makeCore, principal, storage, type TestCore } from './testing.js';

const obj = (name: string): Obj => ({ name, path: '/' + name, size: 0, isDir: false, modified: new Date(0) });
const policy = { ttlMinutes: 1, noCache: false };

describe('ListingCache', () => {
  it('serves from cache until the TTL passes', async () => {
    let now = 0;
    const c = new ListingCache(() => now);
    let calls = 0;
    const fetch = async () => [obj(`v${++calls}`)];
    expect((await c.list(1, '/', policy, fetch))[0]!.name).toBe('v1');
    expect((await c.list(1, '/', policy, fetch))[0]!.name).toBe('v1');
    now = 61_000;
    expect((await c.list(1, '/', policy, fetch))[0]!.name).toBe('v2');
  });

  it('sweeps expired listings of every mount out when it stores one, at most once a SWEEP_EVERY', async () => {
    let now = 0;
    const c = new ListingCache(() => now);
    const fetch = async () => [obj('x')];
    await c.list(1, '/a', policy, fetch); // a sweep (of nothing) at 0; expires at 60 s
    await c.list(2, '/a', { ttlMinutes: 10, noCache: false }, fetch);
    now = 30_000;
    await c.list(1, '/b', policy, fetch); // expires at 90 s
    now = 61_000; // the next sweep: mount 1's /a is gone, /b and mount 2's listing stay
    await c.list(1, '/c', policy, fetch);
    expect([c.size(1), c.size(2)]).toEqual([2, 1]);
    now = 100_000; // /b has expired, but no sweep is due before 121 s
    await c.list(1, '/d', policy, fetch);
    expect(c.size(1)).toBe(3);
    now = 61_000 + SWEEP_EVERY;
    await c.list(2, '/b', policy, fetch); // storing on another mount sweeps this one too
    expect([c.size(1), c.size(2)]).toEqual([1, 2]); // /d only (/c expired at 121 s too)
  });

  it('does not store with TTL 0 or no_cache, and refresh bypasses', async () => {
    const c = new ListingCache();
    let calls = 0;
    const fetch = async () => [obj(`v${++calls}`)];
    await c.list(1, '/', { ttlMinutes: 0, noCache: false }, fetch);
    await c.list(1, '/', { ttlMinutes: 0, noCache: false }, fetch);
    await c.list(1, '/', { ttlMinutes: 5, noCache: true }, fetch);
    expect(calls).toBe(3);
    await c.list(1, '/a', policy, fetch);
    await c.list(1, '/a', policy, fetch, true);
    expect(calls).toBe(5);
  });

  it('shares one fetch between concurrent callers', async () => {
    const c = new ListingCache();
    let calls = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const fetch = async () => {
      calls++;
      await gate;
      return [obj('x')];
    };
    const all = Promise.all([c.list(1, '/', policy, fetch), c.list(1, '/', policy, fetch), c.list(1, '/', policy, fetch)]);
    release();
    expect((await all).every((l) => l[0]!.name === 'x')).toBe(true);
    expect(calls).toBe(1);
  });

  it('invalidates a folder, a subtree, and ignores fetches that raced a write', async () => {
    const c = new ListingCache();
    const fetch = async () => [obj('x')];
    for (const p of ['/', '/a', '/a/b', '/ab']) await c.list(1, p, policy, fetch);
    c.invalidate(1, '/');
    expect(c.size(1)).toBe(3);
    c.invalidateTree(1, '/a');
    expect(c.size(1)).toBe(1); // only /ab is left: /ab is not inside /a
    let release!: () => void;
    const slow = c.list(1, '/x', policy, () => new Promise<Obj[]>((r) => (release = () => r([obj('stale')]))));
    c.invalidate(1, '/x');
    release();
    await slow;
    expect(c.size(1)).toBe(1);
  });

  it('holds at most maxEntries entries in all, dropping the least recently used listings first', async () => {
    const c = new ListingCache(Date.now, 10);
    let calls = 0;
    const listing = (n: number) => async () => (calls++, Array.from({ length: n }, (_, i) => obj(`e${i}`)));
    await c.list(1, '/a', policy, listing(4));
    await c.list(2, '/b', policy, listing(4));
    await c.list(1, '/a', policy, listing(4)); // a hit: /a is now the most recently used
    expect(calls).toBe(2);
    // Each listing counts its entries plus one.
    await c.list(1, '/c', policy, listing(4)); // 15 > 10: /b (mount 2) goes, not /a
    expect([c.size(1), c.size(2), c.heldEntries()]).toEqual([2, 0, 10]);
    await c.list(1, '/huge', policy, listing(10)); // bigger than the cap alone: served, not stored
    expect([c.size(1), c.heldEntries()]).toEqual([2, 10]);
    await c.list(1, '/a', policy, listing(1), true); // a refresh replaces /a's 4 entries by 1
    expect(c.heldEntries()).toBe(7);
    c.invalidateTree(1, '/');
    expect(c.heldEntries()).toBe(0);
    await c.list(3, '/x', policy, listing(3));
    let release!: () => void;
    const slow = c.list(3, '/y', policy, () => new Promise<Obj[]>((r) => (release = () => r([obj('late')]))));
    c.dropMount(3);
    release();
    await slow;
    expect([c.size(3), c.heldEntries()]).toEqual([0, 0]); // the late fetch did not store into the dropped mount
  });

  it('counts empty listings too: a walk through empty folders does not fill the cache without end', async () => {
    const c = new ListingCache(Date.now, 10);
    for (let i = 0; i < 100; i++) await c.list(1, `/empty${i}`, policy, async () => []);
    expect(c.size(1)).toBe(10);
    expect(c.heldEntries()).toBe(10);
  });
});

describe('listing cache through the VFS', () => {
  let core: TestCore;
  let lists = 0;
  const counting: DriverDefinition = {
    ...(memoryDefinition as unknown as DriverDefinition),
    config: { ...memoryDefinition.config, name: 'Counting' },
    create: (o, c) => {
      const d = memoryDefinition.create(o as never, c) as Driver;
      const list = d.list.bind(d);
      d.list = (dir, args) => {
        lists++;
        return list(dir, args);
      };
      return d;
    },
  };
  const admin = ctx(principal(0xfff));
  beforeEach(async () => {
    lists = 0;
    core = await makeCore([counting]);
    await core.storages.create(storage('/c', 'Counting', { cache_expiration: 10 }));
  });
  afterEach(() => core.cleanup());

  it('caches listings and drops them on our own writes', async () => {
    await core.vfs.mkdir(admin, '/c/d');
    await core.vfs.list(admin, '/c/d');
    await core.vfs.list(admin, '/c/d');
    expect(lists).toBe(1);
    await core.vfs.put(admin, '/c/d/f', body('x'));
    expect((await core.vfs.list(admin, '/c/d')).entries.map((e) => e.name)).toEqual(['f']);
    expect(lists).toBe(2);
    await core.vfs.list(admin, '/c/d', { refresh: true });
    expect(lists).toBe(3);
    await core.vfs.moveTo(admin, '/c/d/f', '/c/d/g');
    expect((await core.vfs.list(admin, '/c/d')).entries.map((e) => e.name)).toEqual(['g']);
    await core.vfs.remove(admin, '/c/d/g');
    expect((await core.vfs.list(admin, '/c/d')).entries).toEqual([]);
  });

  it('drops a moved folder\'s subtree', async () => {
    await core.vfs.put(admin, '/c/a/x/f', body('x'));
    await core.vfs.list(admin, '/c/a/x');
    await core.vfs.moveTo(admin, '/c/a', '/c/b');
    expect(await core.vfs.list(admin, '/c/a/x').catch((e) => e.code)).toBe('NOT_FOUND');
    expect((await core.vfs.list(admin, '/c/b/x')).entries.map((e) => e.name)).toEqual(['f']);
  });
});
