/**
 * Task records in a journal of their own (`tasks.jsonl` beside the store, see journal.ts): a folder
 * copy makes a task per entry, each changing state a few times, and in the store every change
 * rewrote the whole file (copying 15,000 small files spent 3.9 ms per file on it).
 */
import { Journal, type JournalKind } from './journal.js';
import type { TaskRepo } from './store.js';
import type { TaskRecord } from './types.js';

const KIND: JournalKind<TaskRecord> = {
  keyOf: (r) => r.id,
  /**
   * What the manager needs of a record to start (a put without `args` made start() throw "Cannot
   * read properties of undefined (reading 'parent')" and the server refuse to start, naming no file).
   */
  valid: (v): v is TaskRecord => {
    const t = v as Partial<TaskRecord> | null | undefined;
    return typeof t === 'object' && t !== null && typeof t.id === 'string' && typeof t.kind === 'string' && typeof t.state === 'number' && typeof t.args === 'object' && t.args !== null;
  },
};

export { COMPACT_MIN } from './journal.js';

export class TaskJournal implements TaskRepo {
  private constructor(readonly journal: Journal<TaskRecord>) {}

  /** Load the journal (a missing file is an empty one). `readOnly` never writes or creates it. */
  static async open(file: string, opts: { readOnly?: boolean } = {}): Promise<TaskJournal> {
    return new TaskJournal(await Journal.open(file, KIND, opts));
  }

  async list(): Promise<TaskRecord[]> {
    return [...this.journal.values()].map((r) => structuredClone(r));
  }

  async get(id: string): Promise<TaskRecord | undefined> {
    const r = this.journal.get(id);
    return r && structuredClone(r);
  }

  put(rec: TaskRecord): Promise<void> {
    return this.journal.put(structuredClone(rec));
  }

  delete(id: string): Promise<boolean> {
    return this.journal.delete(id);
  }

  /** Records moved in from an older store (only ids not here yet); resolves once written. */
  adopt(recs: readonly TaskRecord[]): Promise<void> {
    return this.journal.adopt(recs.map((r) => structuredClone(r)));
  }

  close(): Promise<void> {
    return this.journal.close();
  }
}
