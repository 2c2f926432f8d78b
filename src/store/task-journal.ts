/**
 * Task records in a file of their own, an append-only journal (`tasks.jsonl` beside the store):
 * one line per change, `{"put":record}` or `{"del":id}`, replayed at open. The store file is
 * rewritten whole on every write, and a folder copy makes a task per entry, each changing state a
 * few times: kept in the store, copying 15,000 small files spent 3.9 ms per file rewriting it
 * (quadratic in the folder's size). Here a change costs its own line; changes made together
 * share one append and one fsync, as the store's writes do (a change's promise resolves once it is
 * on disk). When the file grows past twice the live records (and COMPACT_MIN), it is rewritten
 * with the live records only: temp file, fsync, rename, as the store is.
 *
 * A crash can cut the last line short: it is ignored at open (that change is lost, as an unwritten
 * store change would be; the task resumes from its state before) and the next write starts from a
 * clean file. A failed append (a full disk) may leave such a line mid-file, so the next write
 * rewrites the whole file instead of appending after it. Any other line that cannot be read (a
 * disk error, a hand edit) is skipped too, but reported (`damaged`), and the file as found is kept
 * as `tasks.jsonl.damaged` before the next write rewrites it.
 */
import { copyFile, open, readFile, rename, rm, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { TaskRepo } from './store.js';
import type { TaskRecord } from './types.js';

/** Below this size the journal is never compacted (rewriting it would cost more than it saves). */
export const COMPACT_MIN = 1 << 20;

const line = (op: { put: TaskRecord } | { del: string }) => JSON.stringify(op) + '\n';

/**
 * What the manager needs of a record to start (a put without `args` made start() throw "Cannot read
 * properties of undefined (reading 'parent')" and the server refuse to start, naming no file).
 */
function isRecord(r: unknown): r is TaskRecord {
  const t = r as Partial<TaskRecord> | null | undefined;
  return typeof t === 'object' && t !== null && typeof t.id === 'string' && typeof t.kind === 'string' && typeof t.state === 'number' && typeof t.args === 'object' && t.args !== null;
}

export class TaskJournal implements TaskRepo {
  private readonly records = new Map<string, TaskRecord>();
  /** Bytes of each live record's put line, and their sum: what a compacted file holds. */
  private readonly lineBytes = new Map<string, number>();
  private liveBytes = 0;
  /** Lines not written yet, one per record (a later change of the same record replaces its line). */
  private pending = new Map<string, string>();
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

  private constructor(readonly file: string, private readonly readOnly: boolean) {}

  /** Load the journal (a missing file is an empty one). `readOnly` never writes or creates it. */
  static async open(file: string, opts: { readOnly?: boolean } = {}): Promise<TaskJournal> {
    const j = new TaskJournal(file, opts.readOnly ?? false);
    let text = '';
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`${file}: cannot read it: ${(e as Error).message}`);
    }
    const lines = text.split('\n');
    lines.forEach((l, i) => {
      if (l === '') return;
      let op: { put?: TaskRecord; del?: string } | undefined;
      try {
        op = JSON.parse(l) as typeof op;
      } catch {
        op = undefined;
      }
      if (isRecord(op?.put)) j.apply(op.put.id, op.put, Buffer.byteLength(l) + 1);
      else if (typeof op?.del === 'string') j.apply(op.del, undefined);
      else if (i === lines.length - 1) j.dirty = true; // the last line, cut by a crash: expected
      else j.damaged.push(i + 1);
    });
    j.size = Buffer.byteLength(text);
    if (text !== '' && !text.endsWith('\n')) j.dirty = true;
    if (j.damaged.length) {
      // Any other unreadable line (a disk error, a hand edit, a newer version's line) was silently
      // dropped, and the next compaction erased it for good. It is still skipped (one task lost
      // should not stop the server), but the file as found is kept aside for JsonStore to report.
      j.dirty = true;
      const aside = `${file}.damaged`;
      if (!j.readOnly) j.keptAs = await copyFile(file, aside).then(() => aside, () => undefined); // a full disk: say so only
    }
    return j;
  }

  async list(): Promise<TaskRecord[]> {
    return [...this.records.values()].map((r) => structuredClone(r));
  }

  async get(id: string): Promise<TaskRecord | undefined> {
    const r = this.records.get(id);
    return r && structuredClone(r);
  }

  put(rec: TaskRecord): Promise<void> {
    if (this.readOnly) return this.refuse();
    this.stage(structuredClone(rec));
    return this.flush();
  }

  async delete(id: string): Promise<boolean> {
    if (this.readOnly) await this.refuse();
    if (!this.records.has(id)) return false;
    this.apply(id, undefined);
    this.pending.set(id, line({ del: id }));
    await this.flush();
    return true;
  }

  /** Records moved in from an older store (only ids not here yet); resolves once written. */
  adopt(recs: readonly TaskRecord[]): Promise<void> {
    if (this.readOnly) return this.refuse();
    for (const r of recs) if (!this.records.has(r.id)) this.stage(structuredClone(r));
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
  private stage(rec: TaskRecord): void {
    const l = line({ put: rec });
    this.apply(rec.id, rec, Buffer.byteLength(l));
    this.pending.set(rec.id, l);
  }

  /** Set (or with no record, drop) a record in memory, keeping the live size. */
  private apply(id: string, rec: TaskRecord | undefined, bytes = rec ? Buffer.byteLength(line({ put: rec })) : 0): void {
    this.liveBytes -= this.lineBytes.get(id) ?? 0;
    if (rec) {
      this.records.set(id, rec);
      this.lineBytes.set(id, bytes);
      this.liveBytes += bytes;
    } else {
      this.records.delete(id);
      this.lineBytes.delete(id);
    }
  }

  /** Write what is pending: changes made while a write is in flight go together in the next one. */
  private flush(): Promise<void> {
    if (this.scheduled) return this.scheduled;
    const p = this.chain.then(async () => {
      this.scheduled = null;
      const lines = [...this.pending.values()].join('');
      this.pending = new Map();
      if (lines === '' && !this.dirty) return;
      const grown = this.size + Buffer.byteLength(lines);
      if (this.dirty || (grown > COMPACT_MIN && grown > 2 * this.liveBytes)) return this.compact();
      const fh = (this.fh ??= await open(this.file, 'a', 0o600));
      try {
        // appendFile, not write: write() may write only part (a disk that fills up mid-line takes
        // what fits and reports no error), and the change's promise would resolve with its line
        // cut short, lost at the next start. appendFile writes the rest, so that fails with ENOSPC.
        await fh.appendFile(lines);
        await fh.datasync();
      } catch (e) {
        this.dirty = true; // part of the lines may be in the file: the next write replaces it
        throw e;
      }
      this.size = grown;
    });
    this.scheduled = p;
    this.chain = p.catch(() => undefined);
    return p;
  }

  /** Rewrite the file with the live records only (memory already holds every change). */
  private async compact(): Promise<void> {
    this.dirty = true; // until the new file is in place
    const text = [...this.records.values()].map((r) => line({ put: r })).join('');
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
    const dir = await open(dirname(this.file), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
    this.size = Buffer.byteLength(text);
    this.dirty = false;
  }
}
