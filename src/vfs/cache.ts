/**
 * Directory listings cached per mount, keyed by (mountId, driver path). A storage's TTL is its
 * cache_expiration in minutes (0 = not cached); drivers flagged no_cache are never cached.
 * Concurrent fetches of the same folder share one driver call. Our own writes invalidate: the parent
 * folder of every changed path, and the whole subtree when a folder is moved or removed.
 *
 * A generation counter per mount makes invalidation win over fetches already in flight: a listing
 * fetched before a write is not stored after it.
 *
 * An expired listing is dropped when its folder is asked for again, and every listing stored sweeps
 * out all expired ones at most once a SWEEP_EVERY: otherwise a gateway whose users wander through
 * many folders of a remote storage would keep every listing it ever made. (A sweep walks all cached
 * folders, so once a minute keeps it a small share of the work.)
 *
 * The entries held by all listings together are capped (MAX_CACHED_ENTRIES): a long TTL on a big
 * remote storage would otherwise hold every folder anyone opened until it expired. Past the cap the
 * least recently used listings go first; a listing bigger than the cap on its own is not stored.
 * Each listing counts one more than its entries: counted by entries alone, empty folders cost
 * nothing, and a client walking a tree of them filled the cache with listings without end.
 */
import { isWithin } from '../paths.js';
import type { Obj } from '../../drivers/types.js';

interface Cached {
  objs: Obj[];
  expires: number;
  mount: MountCache;
  dpath: string;
}

interface MountCache {
  entries: Map<string, Cached>;
  inflight: Map<string, Promise<Obj[]>>;
  generation: number;
}

/** How often, at most, storing a listing sweeps expired ones out (ms). */
export const SWEEP_EVERY = 60_000;

/** Entries (files and folders) held by all cached listings together, at most (a few hundred bytes each). */
export const MAX_CACHED_ENTRIES = 200_000;

/** What a listing counts against MAX_CACHED_ENTRIES: its entries, and itself. */
const weight = (objs: Obj[]) => objs.length + 1;

export interface CachePolicy {
  /** Minutes; 0 or less disables storing (in-flight sharing still applies). */
  ttlMinutes: number;
  /** The driver's no_cache flag. */
  noCache: boolean;
}

export class ListingCache {
  private readonly mounts = new Map<number, MountCache>();
  private nextSweep = 0;
  /** Every stored listing, least recently used first (a Set keeps insertion order). */
  private readonly lru = new Set<Cached>();
  private held = 0;

  constructor(
    private readonly now: () => number = Date.now,
    private readonly maxEntries = MAX_CACHED_ENTRIES,
  ) {}

  private of(mountId: number): MountCache {
    let m = this.mounts.get(mountId);
    if (!m) this.mounts.set(mountId, (m = { entries: new Map(), inflight: new Map(), generation: 0 }));
    return m;
  }

  /**
   * The listing of `dpath`: from the cache when fresh (and `refresh` is not set), else from `fetch`,
   * shared with any concurrent caller asking for the same folder.
   */
  async list(mountId: number, dpath: string, policy: CachePolicy, fetch: () => Promise<Obj[]>, refresh = false): Promise<Obj[]> {
    const m = this.of(mountId);
    const cacheable = !policy.noCache && policy.ttlMinutes > 0;
    if (cacheable && !refresh) {
      const hit = m.entries.get(dpath);
      if (hit && hit.expires > this.now()) {
        this.lru.delete(hit); // most recently used now
        this.lru.add(hit);
        return hit.objs;
      }
      if (hit) this.drop(hit);
    }
    const pending = m.inflight.get(dpath);
    if (pending && !refresh) return pending;
    const generation = m.generation;
    const p = fetch().then(
      (objs) => {
        // A refresh started while this fetch was in flight took its place: that newer answer (stored
        // already, or still coming) wins. Storing this older one over it undid the refresh until TTL.
        const latest = m.inflight.get(dpath) === p;
        if (latest) m.inflight.delete(dpath);
        if (cacheable && latest && m.generation === generation) this.store(m, dpath, objs, policy.ttlMinutes);
        return objs;
      },
      (e: unknown) => {
        if (m.inflight.get(dpath) === p) m.inflight.delete(dpath);
        throw e;
      },
    );
    m.inflight.set(dpath, p);
    return p;
  }

  private store(m: MountCache, dpath: string, objs: Obj[], ttlMinutes: number): void {
    const now = this.now();
    if (now >= this.nextSweep) {
      this.nextSweep = now + SWEEP_EVERY;
      for (const c of this.lru) if (c.expires <= now) this.drop(c);
    }
    const old = m.entries.get(dpath);
    if (old) this.drop(old);
    if (weight(objs) > this.maxEntries) return;
    const c: Cached = { objs, expires: now + ttlMinutes * 60_000, mount: m, dpath };
    m.entries.set(dpath, c);
    this.lru.add(c);
    this.held += weight(objs);
    for (const oldest of this.lru) {
      if (this.held <= this.maxEntries) break;
      this.drop(oldest);
    }
  }

  private drop(c: Cached): void {
    if (!this.lru.delete(c)) return;
    this.held -= weight(c.objs);
    if (c.mount.entries.get(c.dpath) === c) c.mount.entries.delete(c.dpath);
  }

  /** Drop one folder's listing (after a change inside it). */
  invalidate(mountId: number, dpath: string): void {
    const m = this.mounts.get(mountId);
    if (!m) return;
    m.generation++;
    const c = m.entries.get(dpath);
    if (c) this.drop(c);
    m.inflight.delete(dpath);
  }

  /** Drop a folder and everything below it (after the folder itself moved or was removed). */
  invalidateTree(mountId: number, dpath: string): void {
    const m = this.mounts.get(mountId);
    if (!m) return;
    m.generation++;
    for (const [k, c] of [...m.entries]) if (isWithin(dpath, k)) this.drop(c);
    for (const k of [...m.inflight.keys()]) if (isWithin(dpath, k)) m.inflight.delete(k);
  }

  /** Forget a mount entirely (unmounted, re-initialised or deleted). */
  dropMount(mountId: number): void {
    const m = this.mounts.get(mountId);
    if (!m) return;
    m.generation++; // a fetch still in flight must not store into the forgotten mount
    for (const c of [...m.entries.values()]) this.drop(c);
    this.mounts.delete(mountId);
  }

  /** Number of cached folders of a mount (for tests and diagnostics). */
  size(mountId: number): number {
    return this.mounts.get(mountId)?.entries.size ?? 0;
  }

  /** What all cached listings count against the cap: their entries, plus one each (for tests and diagnostics). */
  heldEntries(): number {
    return this.held;
  }
}
