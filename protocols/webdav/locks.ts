/**
 * WebDAV locks (RFC 4918 §6-7), kept in memory for speed and written through to the store's KV
 * namespace `webdav.locks`, so they survive a restart. Locks are keyed by *virtual* path (base path
 * included), so users with different base paths see the same locks on the same file.
 *
 * A lock "covers" a path when it is rooted there, or at an ancestor with depth infinity. Expired
 * locks are dropped whenever they are looked at, and all of them at most once a SWEEP_EVERY when a
 * write asks whether any lock exists: a client that locks and goes away (Windows, Finder) leaves its
 * lock behind, which would stay in the store for good and keep every write off the no-lock fast path.
 */
import { randomUUID } from 'node:crypto';
import { VfsError } from '../../src/errors.js';
import { DavError } from './errors.js';
import { isWithin } from '../../src/paths.js';
import type { KvRepo } from '../../src/store/store.js';

export const LOCKS_NS = 'webdav.locks';
/** Longest lock we grant; clients refresh (Windows asks for Infinite and refreshes anyway). */
export const MAX_TIMEOUT_S = 24 * 3600;
export const DEFAULT_TIMEOUT_S = 3600;
/** How often, at most, all expired locks are swept out (ms). */
export const SWEEP_EVERY = 60_000;
/**
 * Live locks one user may hold. Each is a store record, and every LOCK rewrites the store: a client
 * (or script) locking path after path without unlocking would grow it without bound. Windows and
 * Finder hold about one per file open for writing; past the bound a LOCK is 507.
 */
export const MAX_LOCKS_PER_USER = 1000;

export interface LockInfo {
  token: string;
  /** Virtual path of the locked resource. */
  root: string;
  depth: '0' | 'infinity';
  scope: 'exclusive' | 'shared';
  /** The `<D:owner>` content as the client sent it (self-contained XML). */
  owner: string;
  userId: number;
  /** Granted timeout in seconds. */
  timeout: number;
  /** Epoch ms. */
  expires: number;
}

/** Every ancestor of a normalised virtual path, root first, the path itself last. */
export function ancestry(vpath: string): string[] {
  const out = ['/'];
  if (vpath === '/') return out;
  let i = 0;
  while ((i = vpath.indexOf('/', i + 1)) !== -1) out.push(vpath.slice(0, i));
  out.push(vpath);
  return out;
}

/** Parse a `Timeout` header (`Second-3600`, `Infinite`, a comma list): the first usable value, capped. */
export function parseTimeout(h: string | undefined): number {
  for (const part of (h ?? '').split(',')) {
    const t = part.trim().toLowerCase();
    if (t === 'infinite') return MAX_TIMEOUT_S;
    const m = /^second-(\d+)$/.exec(t);
    if (m) return Math.max(1, Math.min(Number(m[1]), MAX_TIMEOUT_S));
  }
  return DEFAULT_TIMEOUT_S;
}

export class LockManager {
  private readonly byToken = new Map<string, LockInfo>();
  private readonly byRoot = new Map<string, Set<string>>();
  /** Live locks per user id (MAX_LOCKS_PER_USER). */
  private readonly perUser = new Map<number, number>();
  private loading?: Promise<void>;
  private nextSweep = 0;

  constructor(
    private readonly kv: KvRepo,
    private readonly now: () => number = Date.now,
  ) {}

  /** Load persisted locks once. Every public async method awaits it. */
  ready(): Promise<void> {
    return (this.loading ??= (async () => {
      for (const [token, lock] of await this.kv.entries<LockInfo>(LOCKS_NS)) {
        if (lock.expires > this.now()) this.index(lock);
        // Dropped from the store as alive() does, without waiting: a delete that failed (a full disk)
        // rejected this promise, which stays cached, and every WebDAV request answered 500 until a restart.
        else void this.kv.delete(LOCKS_NS, token).catch(() => undefined);
      }
    })());
  }

  /** True when no live lock exists at all (the fast path for every write). */
  get empty(): boolean {
    if (this.byToken.size === 0) return true;
    if (this.now() >= this.nextSweep) this.sweep();
    return this.byToken.size === 0;
  }

  private sweep(): void {
    this.nextSweep = this.now() + SWEEP_EVERY;
    for (const l of [...this.byToken.values()]) this.alive(l);
  }

  get(token: string): LockInfo | undefined {
    const l = this.byToken.get(token);
    return l && this.alive(l) ? l : undefined;
  }

  /** Locks rooted at `vpath` or at an ancestor with depth infinity. */
  covering(vpath: string): LockInfo[] {
    if (this.byToken.size === 0) return [];
    const out: LockInfo[] = [];
    const chain = ancestry(vpath);
    chain.forEach((p, i) => {
      for (const t of this.byRoot.get(p) ?? []) {
        const l = this.byToken.get(t);
        if (l && this.alive(l) && (i === chain.length - 1 || l.depth === 'infinity')) out.push(l);
      }
    });
    return out;
  }

  /** Locks rooted at `vpath` or anywhere below it. */
  within(vpath: string): LockInfo[] {
    return [...this.byToken.values()].filter((l) => this.alive(l) && isWithin(vpath, l.root));
  }

  /** Existing locks a new lock would conflict with (exclusive conflicts with all, shared with exclusive). */
  conflicts(root: string, depth: LockInfo['depth'], scope: LockInfo['scope']): LockInfo[] {
    const near = [...this.covering(root), ...(depth === 'infinity' ? this.within(root).filter((l) => l.root !== root) : [])];
    return near.filter((l) => scope === 'exclusive' || l.scope === 'exclusive');
  }

  /** Throws 507 when `userId` holds MAX_LOCKS_PER_USER live locks (LOCK checks before it creates a file). */
  checkRoom(userId: number): void {
    if ((this.perUser.get(userId) ?? 0) < MAX_LOCKS_PER_USER) return;
    this.sweep(); // expired ones do not count
    if ((this.perUser.get(userId) ?? 0) >= MAX_LOCKS_PER_USER) throw new DavError(507, `at most ${MAX_LOCKS_PER_USER} live locks per user: unlock some first`);
  }

  /** Grant a new lock, or throw LOCKED when it conflicts with an existing one (507 past the bound). */
  async create(req: Omit<LockInfo, 'token' | 'expires'>): Promise<LockInfo> {
    await this.ready();
    if (this.conflicts(req.root, req.depth, req.scope).length) throw new VfsError('LOCKED', 'the resource is locked');
    this.checkRoom(req.userId);
    const lock: LockInfo = { ...req, token: `opaquelocktoken:${randomUUID()}`, expires: this.now() + req.timeout * 1000 };
    this.index(lock); // at once, so a concurrent LOCK sees the conflict
    // A lock the store could not save (a full disk) is not granted: kept in memory, it locked the
    // resource with a token no client was given, until it timed out (a day with `Infinite`).
    await this.kv.set(LOCKS_NS, lock.token, lock).catch((e: unknown) => {
      this.unindex(lock);
      throw e;
    });
    return lock;
  }

  async refresh(token: string, timeout: number): Promise<LockInfo | undefined> {
    await this.ready();
    const l = this.get(token);
    if (!l) return undefined;
    // Saved first: a refresh the store could not save (a full disk) extended the lock in memory only,
    // though the client was told it failed (and after a restart it ran out sooner than PROPFIND said).
    const next = { ...l, timeout, expires: this.now() + timeout * 1000 };
    await this.kv.set(LOCKS_NS, token, next);
    l.timeout = next.timeout;
    l.expires = next.expires;
    return l;
  }

  async remove(token: string): Promise<boolean> {
    await this.ready();
    const l = this.byToken.get(token);
    if (!l) return false;
    this.unindex(l); // at once, so a refresh racing this finds it gone (and does not save it again)
    // A delete the store could not save (a full disk) keeps the lock: dropped from memory only, a
    // retried UNLOCK answered 409 and the lock came back at the next restart.
    await this.kv.delete(LOCKS_NS, token).catch((e: unknown) => {
      if (!this.byToken.has(token)) this.index(l);
      throw e;
    });
    return true;
  }

  /** Put back locks that were dropped with the resource they were on (see copy-move.ts), if still live. */
  async restore(locks: LockInfo[]): Promise<void> {
    await this.ready();
    for (const l of locks) {
      if (this.byToken.has(l.token) || l.expires <= this.now()) continue;
      this.index(l);
      await this.kv.set(LOCKS_NS, l.token, l);
    }
  }

  /**
   * Drop every lock rooted at or below `vpath` (after DELETE, or the source of a MOVE), except those
   * below a path in `keep` (storages still mounted inside a removed one).
   */
  async removeWithin(vpath: string, keep: readonly string[] = []): Promise<void> {
    // Loaded first: a file deleted over REST or SFTP after a restart, before any WebDAV request loaded
    // the persisted locks, kept its lock, and a new file of that name answered 423.
    await this.ready();
    if (this.byToken.size === 0) return;
    for (const l of this.within(vpath)) if (!keep.some((k) => isWithin(k, l.root))) await this.remove(l.token);
  }

  private alive(l: LockInfo): boolean {
    if (l.expires > this.now()) return true;
    this.unindex(l);
    void this.kv.delete(LOCKS_NS, l.token).catch(() => undefined);
    return false;
  }

  private index(l: LockInfo): void {
    this.byToken.set(l.token, l);
    this.perUser.set(l.userId, (this.perUser.get(l.userId) ?? 0) + 1);
    let set = this.byRoot.get(l.root);
    if (!set) this.byRoot.set(l.root, (set = new Set()));
    set.add(l.token);
  }

  private unindex(l: LockInfo): void {
    if (!this.byToken.delete(l.token)) return;
    const held = (this.perUser.get(l.userId) ?? 1) - 1;
    if (held > 0) this.perUser.set(l.userId, held);
    else this.perUser.delete(l.userId);
    const set = this.byRoot.get(l.root);
    set?.delete(l.token);
    if (set && set.size === 0) this.byRoot.delete(l.root);
  }
}
