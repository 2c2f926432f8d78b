/**
 * The store's namespaced key-value data (WebDAV locks and dead properties) in a journal of its own
 * (`kv.jsonl` beside the store, see journal.ts): a LOCK, UNLOCK or PROPPATCH comes with nearly every
 * file a WebDAV client saves, and in the store each rewrote the whole file (a Windows upload's
 * PROPPATCHes cost 20 ms per file after 4,000 files).
 */
import { Journal, type JournalKind } from './journal.js';
import type { KvRepo } from './store.js';

interface KvEntry {
  ns: string;
  key: string;
  value: unknown;
}

const KIND: JournalKind<KvEntry> = {
  keyOf: (e) => JSON.stringify([e.ns, e.key]),
  valid: (v): v is KvEntry => {
    const e = v as Partial<KvEntry> | null | undefined;
    return typeof e === 'object' && e !== null && typeof e.ns === 'string' && typeof e.key === 'string' && 'value' in e;
  },
};

export class KvJournal implements KvRepo {
  /** Each namespace's entries, for entries(ns). */
  private readonly byNs = new Map<string, Map<string, KvEntry>>();

  private constructor(readonly journal: Journal<KvEntry>) {
    for (const e of journal.values()) this.index(e);
  }

  static async open(file: string, opts: { readOnly?: boolean } = {}): Promise<KvJournal> {
    return new KvJournal(await Journal.open(file, KIND, opts));
  }

  async get<T>(ns: string, key: string): Promise<T | undefined> {
    const e = this.byNs.get(ns)?.get(key);
    return e === undefined ? undefined : (structuredClone(e.value) as T);
  }

  set<T>(ns: string, key: string, value: T): Promise<void> {
    const e: KvEntry = { ns, key, value: structuredClone(value) };
    if (!this.journal.readOnly) this.index(e); // a read-only journal refuses the put: nothing changes
    return this.journal.put(e);
  }

  delete(ns: string, key: string): Promise<boolean> {
    // Out of the index at once, as set() puts it in: dropped once the write was done, it also dropped
    // a set() of the same key made meanwhile (kept in the journal and after a reopen, but missing
    // from get() and entries() until then).
    if (!this.journal.readOnly) this.byNs.get(ns)?.delete(key);
    return this.journal.delete(KIND.keyOf({ ns, key, value: undefined }));
  }

  async entries<T>(ns: string): Promise<Array<[string, T]>> {
    return [...(this.byNs.get(ns)?.values() ?? [])].map((e) => [e.key, structuredClone(e.value) as T]);
  }

  /** Entries moved in from an older store (`{ns: {key: value}}`; keys already here are kept). */
  adopt(kv: Record<string, Record<string, unknown>>): Promise<void> {
    const entries = Object.entries(kv).flatMap(([ns, m]) => Object.entries(m).map(([key, value]) => ({ ns, key, value })));
    const written = this.journal.adopt(entries);
    for (const e of entries) if (this.journal.get(KIND.keyOf(e)) === e) this.index(e);
    return written;
  }

  close(): Promise<void> {
    return this.journal.close();
  }

  private index(e: KvEntry): void {
    let m = this.byNs.get(e.ns);
    if (!m) this.byNs.set(e.ns, (m = new Map()));
    m.set(e.key, e);
  }
}
