/**
 * The build job's writes, done by a worker thread over a second connection to the index file, so
 * that listing (main thread) and writing (the worker) overlap: a build otherwise costs a listing of
 * the tree plus its row writes, one after the other, on one core (bench/search.mjs).
 *
 * A batch is one transaction in the worker (a huge one several, see write()): exactly what
 * IndexStore.upsert does for its rows (same statements, WRITE_SQL) plus the job's queue and progress
 * updates, so the file always holds a frontier consistent with the rows. Batches are written in the
 * order they are sent. Both connections take the write lock up front (IMMEDIATE, see IndexStore.tx)
 * and wait for each other through SQLite's busy timeout; readers (searches) are never blocked (WAL).
 *
 * The builder keeps a writer for a while after a job (builder.ts, WRITER_IDLE_MS): starting the
 * thread is a noticeable part of a small job.
 *
 * The worker is plain JavaScript given as source text: it needs no module of its own (so it runs the
 * same from the TypeScript sources under the tests and from dist), only better-sqlite3, whose
 * resolved path it is handed.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { CONNECTION_PRAGMAS } from './schema.js';
import { WRITE_SQL, type IndexRow, type QueuedFolder } from './store.js';
import { fold } from './text.js';

export interface WriteBatch {
  rows: readonly IndexRow[];
  /** Folders to add to the job's queue (with the ids the job gave them). */
  enqueue: readonly QueuedFolder[];
  /** Queue ids of folders listed. */
  dequeue: readonly number[];
  /** Added to the progress count (a build job's). */
  count: number;
}

/**
 * Rows per transaction at most: the write lock, which VFS updates on the main thread wait for
 * (busy timeout), is held that long.
 */
export const MAX_TX_ROWS = 5000;

/**
 * Rows per INSERT statement in the worker: a statement call per row cost about a tenth of the
 * writes. (A multi-row upsert updates a row met twice just as single rows in turn would.)
 */
const ROWS_PER_INSERT = 50;

/** What the worker receives: rows flattened to upsert's parameters, five values a row (cheaper to post than objects). */
interface Message {
  rows: Array<string | number>;
  enqueue: Array<string | number>;
  dequeue: number[];
  count: number;
}

const WORKER_SOURCE = `
const { parentPort, workerData: w } = require('node:worker_threads');
const db = new (require(w.sqlite))(w.file);
for (const p of w.pragmas) db.pragma(p);
const s = {};
for (const k of Object.keys(w.sql)) s[k] = db.prepare(w.sql[k]);
const maxId = s.maxId.pluck();
const many = db.prepare(w.sql.upsert.replace('(?, ?, ?, ?, ?)', new Array(w.rowsPerInsert).fill('(?, ?, ?, ?, ?)').join(', ')));
const write = db.transaction((m) => {
  const before = maxId.get();
  const r = m.rows;
  const n = 5 * w.rowsPerInsert;
  let i = 0;
  for (; i + n <= r.length; i += n) many.run(r.slice(i, i + n));
  for (; i < r.length; i += 5) s.upsert.run(r[i], r[i + 1], r[i + 2], r[i + 3], r[i + 4]);
  s.indexFrom.run(before);
  const q = m.enqueue;
  for (let i = 0; i < q.length; i += 3) s.enqueue.run(q[i], q[i + 1], q[i + 2]);
  for (const id of m.dequeue) s.dequeue.run(id);
  if (m.count) s.count.run(m.count);
});
// After a failure nothing more is written: later batches would record a frontier that skips the failed one.
const state = { failed: '' };
parentPort.on('message', (m) => {
  if (!state.failed) {
    try {
      write.immediate(m);
    } catch (e) {
      state.failed = (e && e.message) || String(e);
    }
  }
  parentPort.postMessage(state.failed);
});
`;

export class BatchWriter {
  private readonly worker: Worker;
  private pending = 0;
  private failure: Error | undefined;
  private waiters: Array<() => void> = [];

  constructor(file: string) {
    const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file, sqlite, pragmas: CONNECTION_PRAGMAS, sql: WRITE_SQL, rowsPerInsert: ROWS_PER_INSERT } });
    this.worker.on('message', (error: string) => {
      this.pending--;
      if (error) this.fail(new Error(error));
      this.wake();
    });
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', () => this.fail(new Error('index writer stopped')));
  }

  /** A transaction failed or the thread stopped: nothing more can be written through this writer. */
  get failed(): boolean {
    return this.failure !== undefined;
  }

  /** Whether the thread keeps the process alive (while a job uses it; not while it idles between jobs). */
  hold(on: boolean): void {
    if (on) this.worker.ref();
    else this.worker.unref();
  }

  /** Transactions sent and not yet written. */
  get queued(): number {
    return this.pending;
  }

  /**
   * Send a batch (written after those sent before). Throws what an earlier batch failed with.
   * A batch of more than MAX_TX_ROWS rows (one huge folder) takes several transactions; the queue
   * and progress updates come with the last, so a crash in between only has its folders listed
   * again (rows are upserted: nothing is indexed or counted twice).
   */
  write(b: WriteBatch): void {
    if (this.failure) throw this.failure;
    for (let i = 0; ; i += MAX_TX_ROWS) {
      const last = i + MAX_TX_ROWS >= b.rows.length;
      const m: Message = { rows: [], enqueue: [], dequeue: last ? [...b.dequeue] : [], count: last ? b.count : 0 };
      for (const r of b.rows.slice(i, i + MAX_TX_ROWS)) m.rows.push(r.parent, r.name, fold(r.name), r.isDir ? 1 : 0, r.isDir ? 0 : r.size);
      if (last) for (const f of b.enqueue) m.enqueue.push(f.id, f.path, f.depth);
      this.worker.postMessage(m);
      this.pending++;
      if (last) return;
    }
  }

  /** Wait until at most `n` transactions are unwritten; throws what one failed with. */
  async settle(n = 0): Promise<void> {
    while (this.pending > n && !this.failure) await new Promise<void>((resolve) => this.waiters.push(resolve));
    if (this.failure) throw this.failure;
  }

  /** Stop the thread (after settle(): batches not yet written are dropped). */
  async close(): Promise<void> {
    this.failure ??= new Error('index writer closed');
    await this.worker.terminate();
  }

  private fail(err: Error): void {
    this.failure ??= err;
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const resolve of w) resolve();
  }
}
