/**
 * A map of records kept in an append-only journal file: one line per change, `{"put":value}` or
 * `{"del":key}`, replayed at open. The store file (store.json) is rewritten whole on every write;
 * what changes often and in numbers lives in journals beside it instead (tasks.jsonl: a folder copy
 * makes a task per entry, each changing state a few times; kv.jsonl: WebDAV locks and dead
 * properties, a LOCK, UNLOCK or PROPPATCH for every file a client saves). In the store, copying
 * 15,000 small files spent 3.9 ms per file rewriting it, and a Windows upload's PROPPATCHes 20 ms
 * per file after 4,000 files (both quadratic). Here a change costs its own line; changes made
 * together share one append and one fsync, as the store's writes do (a change's promise resolves
 * once it is on disk). When the file grows past twice the live records (and COMPACT_MIN), it is
 * rewritten with the live records only: temp file, fsync, rename, as the store is.
 *
 * A crash can cut the last line short: it is ignored at open (that change is lost, as an unwritten
 * store change would be) and the next write starts from a clean file. A write that fails (a full
 * disk) is undone: the file is cut back to where it was (or, if that fails too, the next write
 * rewrites it whole) and memory goes back to it, so the change its caller was told failed is not
 * saved by a later write, as the store does. Any other line that cannot be read (a disk error, a hand edit) is skipped too, but
 * reported (`damaged`), and the file as found is kept as `<file>.damaged` before the next write
 * rewrites it.
 */
import { copyFile, open, readFile, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Below this size a journal is never compacted (rewriting it would cost more than it saves). */
export const COMPACT_MIN = 1 << 20;

export interface JournalKind<V> {
  /** The record's key (unique in the journal). */
  keyOf(v: V): string;
  /** Whether a value read back is a record of this journal (a line failing this counts as damaged). */
  valid(v: unknown): v is V;
}

const line = <V>(op: { put: V } | { del: string }) => JSON.stringify(op) + '\n';

export class Journal<V> {
  private readonly records = new Map<string, V>();
  /** Bytes of each live record's put line, and their sum: what a compacted file holds. */
  private readonly lineBytes = new Map<string, number>();
  private liveBytes = 0;
  /** Lines not written yet, one per record (a later change of the same record replaces its line). */
  private pending = new Map<string, string>();
  /**
   * What each pending key holds on disk (undefined: nothing), from before its first pending change:
   * a write that fails puts these back in memory, so a change whose caller got an error is not
   * saved by a later write (a LOCK refused on a full disk must not come back at the next start).
   */
  private pendingBefore = new Map<string, V | undefined>();
  /** The file's name is on disk (it existed at open, or its folder was fsynced since it was made). */
  private named = false;
  private fh: FileHandle | undefined;
  private size = 0;
  /** The file may end in a torn line (found at open, or left by a failed append): rewrite it whole. */
  private dirty = false;
  private scheduled: Promise<void> | null = null;
  private chain: Promise<void> = Promise.resolve();
  private seq = 0;

  /** Line numbers (from 1) of lines that could not be read, the torn last line aside (see open). */
  readonly damaged: number[] = [];
  /** Where the file as found was copied when some lines were damaged (not in read-only mode). */
  keptAs: string | undefined;

  private constructor(readonly file: string, private readonly kind: JournalKind<V>, readonly readOnly: boolean) {}

  /** Load the journal (a missing file is an empty one). `readOnly` never writes or creates it. */
  static async open<V>(file: string, kind: JournalKind<V>, opts: { readOnly?: boolean } = {}): Promise<Journal<V>> {
    const j = new Journal<V>(file, kind, opts.readOnly ?? false);
    let text = '';
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`${file}: cannot read it: ${(e as Error).message}`);
    }
    const lines = text.split('\n');
    lines.forEach((l, i) => {
      if (l === '') return;
      let op: { put?: unknown; del?: unknown } | undefined;
      try {
        op = JSON.parse(l) as typeof op;
      } catch {
        op = undefined;
      }
      if (op && kind.valid(op.put)) j.apply(kind.keyOf(op.put), op.put, Buffer.byteLength(l) + 1);
      else if (typeof op?.del === 'string') j.apply(op.del, undefined);
      else if (i === lines.length - 1) j.dirty = true; // the last line, cut by a crash: expected
      else j.damaged.push(i + 1);
    });
    j.size = Buffer.byteLength(text);
    j.named = text !== '' || (await stat(file).then(() => true, () => false));
    if (text !== '' && !text.endsWith('\n')) j.dirty = true;
    if (j.damaged.length) {
      // Skipped (one lost record should not stop the server), but never silently: the file as
      // found is kept aside for the store to report, before the next write rewrites it.
      j.dirty = true;
      const aside = `${file}.damaged`;
      if (!j.readOnly) j.keptAs = await copyFile(file, aside).then(() => aside, () => undefined); // a full disk: say so only
    }
    return j;
  }

  get(key: string): V | undefined {
    return this.records.get(key);
  }

  values(): IterableIterator<V> {
    return this.records.values();
  }

  /** Set a record (the journal keeps `v` itself: the caller must not change it afterwards). */
  put(v: V): Promise<void> {
    if (this.readOnly) return this.refuse();
    this.stage(v);
    return this.flush();
  }

  async delete(key: string): Promise<boolean> {
    if (this.readOnly) await this.refuse();
    if (!this.records.has(key)) return false;
    this.remember(key);
    this.apply(key, undefined);
    this.pending.set(key, line({ del: key }));
    await this.flush();
    return true;
  }

  /** Records moved in from an older store (only keys not here yet); resolves once written. */
  adopt(vs: readonly V[]): Promise<void> {
    if (this.readOnly) return this.refuse();
    for (const v of vs) if (!this.records.has(this.kind.keyOf(v))) this.stage(v);
    return this.pending.size || this.dirty ? this.flush() : this.chain;
  }

  /** Waits for the writes under way; the journal is not written after this. */
  async close(): Promise<void> {
    await this.chain;
    await this.fh?.close().catch(() => undefined);
    this.fh = undefined;
  }

  private refuse(): Promise<never> {
    return Promise.reject(new Error(`${this.file} is open read-only`));
  }

  /** A record's new state, in memory and as the line to write. */
  private stage(v: V): void {
    const l = line({ put: v });
    const key = this.kind.keyOf(v);
    this.remember(key);
    this.apply(key, v, Buffer.byteLength(l));
    this.pending.set(key, l);
  }

  private remember(key: string): void {
    if (!this.pendingBefore.has(key)) this.pendingBefore.set(key, this.records.get(key));
  }

  /** After a failed write: memory goes back to the file for the keys of that write (see pendingBefore). */
  private undo(before: Map<string, V | undefined>): void {
    for (const [key, v] of before) {
      // Changed again since: that change goes in the next write, and is undone to the same value.
      if (this.pending.has(key)) this.pendingBefore.set(key, v);
      else this.apply(key, v);
    }
  }

  /** Set (or with no value, drop) a record in memory, keeping the live size. */
  private apply(key: string, v: V | undefined, bytes = v === undefined ? 0 : Buffer.byteLength(line({ put: v }))): void {
    this.liveBytes -= this.lineBytes.get(key) ?? 0;
    if (v !== undefined) {
      this.records.set(key, v);
      this.lineBytes.set(key, bytes);
      this.liveBytes += bytes;
    } else {
      this.records.delete(key);
      this.lineBytes.delete(key);
    }
  }

  /** Write what is pending: changes made while a write is in flight go together in the next one. */
  private flush(): Promise<void> {
    if (this.scheduled) return this.scheduled;
    const p = this.chain.then(async () => {
      this.scheduled = null;
      const lines = [...this.pending.values()].join('');
      const before = this.pendingBefore;
      this.pending = new Map();
      this.pendingBefore = new Map();
      if (lines === '' && !this.dirty) return;
      const grown = this.size + Buffer.byteLength(lines);
      try {
        if (this.dirty || (grown > COMPACT_MIN && grown > 2 * this.liveBytes)) return await this.compact();
        await this.append(lines);
      } catch (e) {
        this.undo(before);
        throw e;
      }
      this.size = grown;
    });
    this.scheduled = p;
    this.chain = p.catch(() => undefined);
    return p;
  }

  private async append(lines: string): Promise<void> {
    const fh = (this.fh ??= await open(this.file, 'a', 0o600));
    try {
      // appendFile, not write: write() may write only part (a disk that fills up mid-line takes
      // what fits and reports no error), and the change's promise would resolve with its line
      // cut short, lost at the next start. appendFile writes the rest, so that fails with ENOSPC.
      await fh.appendFile(lines);
      await fh.datasync();
    } catch (e) {
      // Part of the lines may be in the file: cut it back to what was written before, or, when
      // that fails too, have the next write replace the file.
      await fh.truncate(this.size).then(() => fh.datasync()).catch(() => (this.dirty = true));
      throw e;
    }
    if (!this.named) {
      await syncDir(this.file); // a new file: its name must survive a power cut as its lines do
      this.named = true;
    }
  }

  /** Rewrite the file with the live records only (memory already holds every change). */
  private async compact(): Promise<void> {
    this.dirty = true; // until the new file is in place
    const text = [...this.records.values()].map((v) => line({ put: v })).join('');
    const tmp = `${this.file}.${process.pid}.${++this.seq}.tmp`;
    try {
      const fh = await open(tmp, 'w', 0o600);
      try {
        await fh.writeFile(text, 'utf8');
        await fh.sync();
      } finally {
        await fh.close();
      }
      await this.fh?.close().catch(() => undefined);
      this.fh = undefined;
      await rename(tmp, this.file);
    } catch (e) {
      await rm(tmp, { force: true }).catch(() => undefined);
      throw e;
    }
    this.size = Buffer.byteLength(text);
    this.dirty = false;
    // The new file is in place, its content on disk: a failure to sync its folder is not the
    // write's (undoing memory now would leave it ahead of nothing); the next compaction syncs again.
    await syncDir(this.file).catch(() => undefined);
    this.named = true;
  }
}

async function syncDir(file: string): Promise<void> {
  const dir = await open(dirname(file), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
