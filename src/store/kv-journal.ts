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

const keyOf = (ns: string, key: string) => JSON.stringify([ns, key]);

const KIND: JournalKind<KvEntry> = {
  keyOf: (e) => keyOf(e.ns, e.key),
  valid: (v): v is KvEntry => {
    const e = v as Partial<KvEntry> | null | undefined;
    return typeof e === 'object' && e !== null && typeof e.ns === 'string' && typeof e.key === 'string' && 'value' in e;
  },
};

export class KvJournal implements KvRepo {
  private constructor(readonly journal: Journal<KvEntry>) {}

  static async open(file: string, opts: { readOnly?: boolean } = {}): Promise<KvJournal> {
    return new KvJournal(await Journal.open(file, KIND, opts));
  }

  async get<T>(ns: string, key: string): Promise<T | undefined> {
    const e = this.journal.get(keyOf(ns, key));
    return e === undefined ? undefined : (structuredClone(e.value) as T);
  }

  set<T>(ns: string, key: string, value: T): Promise<void> {
    return this.journal.put({ ns, key, value: structuredClone(value) });
  }

  delete(ns: string, key: string): Promise<boolean> {
    return this.journal.delete(keyOf(ns, key));
  }

  /**
   * A namespace's entries. Walks every entry, with no index of its own to keep in step with the
   * journal (which puts memory back when a write fails): locks and properties read them once, at load.
   */
  async entries<T>(ns: string): Promise<Array<[string, T]>> {
    const out: Array<[string, T]> = [];
    for (const e of this.journal.values()) if (e.ns === ns) out.push([e.key, structuredClone(e.value) as T]);
    return out;
  }

  /** Entries moved in from an older store (`{ns: {key: value}}`; keys already here are kept). */
  adopt(kv: Record<string, Record<string, unknown>>): Promise<void> {
    return this.journal.adopt(Object.entries(kv).flatMap(([ns, m]) => Object.entries(m).map(([key, value]) => ({ ns, key, value }))));
  }

  close(): Promise<void> {
    return this.journal.close();
  }
}
