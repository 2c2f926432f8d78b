/**
 * The index build as a resumable background job (alist-compat §8). The job and its frontier live
 * in the index file: `queue` holds the folders still to list. A few folders are listed at once, and
 * listed folders are written in batches: each batch's rows, the subfolders it found and the removal
 * of the folders it listed from the queue go in one transaction — so after a crash or restart the
 * job simply goes on with what is left (re-listing at most one batch). Between batches the loop
 * yields, so requests stay responsive on a small machine.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import { VfsError } from '../errors.js';
import { segments } from '../paths.js';
import type { Vfs } from '../vfs/vfs.js';
import type { Entry } from '../vfs/types.js';
import { indexerContext, rowOf, type IndexScope } from './scope.js';
import type { IndexRow, IndexStore } from './store.js';

/** AList's IndexProgress (`last_done_time` as ISO text here; the REST layer formats it). */
export interface IndexProgress {
  obj_count: number;
  is_done: boolean;
  last_done_time: string | null;
  error: string;
}

export interface JobSpec {
  /** `build` counts progress (and usually starts from a cleared index); `update` does not (AList). */
  kind: 'build' | 'update';
  paths: string[];
  /** Levels below each path; -1 unlimited. */
  maxDepth: number;
  ignore: string[];
}

/** Folders listed at once, so that slow storages (network, cloud APIs) overlap their round trips. */
const LISTINGS_IN_FLIGHT = 6;
/**
 * Listed folders are written together, one transaction per this many rows or this long: a commit
 * per folder made every small transaction flush its own FTS segment, which cost more than the rows.
 * Bounded so one commit never holds the event loop for long.
 */
const BATCH_ROWS = 4000;
const BATCH_MS = 200;

/** A folder of the job's frontier; `id` is its queue row once one is written. */
interface Folder {
  id?: number;
  path: string;
  depth: number;
}

/** Listed but not yet committed. */
interface Batch {
  rows: IndexRow[];
  /** Folders listed (taken off the queue at commit). */
  done: Folder[];
  /** Subfolders found (queued at commit unless listed by then). */
  found: Folder[];
  since: number;
}

const IDLE: IndexProgress = { obj_count: 0, is_done: false, last_done_time: null, error: '' };

export class IndexBuilder {
  private loop: Promise<void> | undefined;
  private abort: AbortController | undefined;
  /** Why the loop should end: `stop` finishes the job, `pause` keeps it for a later resume. */
  private halt: 'stop' | 'pause' | undefined;

  constructor(private readonly store: IndexStore, private readonly vfs: Vfs, private readonly scope: IndexScope, private readonly log: Logger) {}

  get running(): boolean {
    return this.loop !== undefined;
  }

  progress(): IndexProgress {
    return this.store.getState<IndexProgress>('progress') ?? IDLE;
  }

  /** Start a job (the caller has already cleared or trimmed the index as the request asked). */
  start(job: JobSpec): void {
    if (this.running) throw new VfsError('INVALID', 'index is running');
    this.store.tx(() => {
      this.store.clearQueue();
      for (const p of job.paths) this.store.enqueue(p, 0);
      this.store.setState('job', job);
      if (job.kind === 'build') this.store.setState('progress', { ...IDLE });
    });
    this.launch(job);
  }

  /** Go on with a job a previous run left unfinished. */
  resume(): void {
    const job = this.store.getState<JobSpec>('job');
    if (job && !this.running) this.launch(job);
  }

  /** Finish the running job now (AList: done, with what was indexed so far). */
  async stop(): Promise<void> {
    if (!this.running) throw new VfsError('INVALID', 'index is not running');
    await this.end('stop');
  }

  /** Let the loop end but keep the job for resume() (server shutdown, search switched off). */
  async pause(): Promise<void> {
    if (this.running) await this.end('pause');
  }

  private async end(how: 'stop' | 'pause'): Promise<void> {
    this.halt = how;
    this.abort?.abort();
    await this.loop;
  }

  private launch(job: JobSpec): void {
    this.halt = undefined;
    this.abort = new AbortController();
    this.loop = this.run(job, this.abort.signal)
      .catch((err: unknown) => {
        this.log.error({ err }, 'index build failed');
        this.finish(job, err instanceof Error ? err.message : String(err));
      })
      .finally(() => {
        this.loop = undefined;
        this.abort = undefined;
      });
  }

  private async run(job: JobSpec, signal: AbortSignal): Promise<void> {
    const frontier: Folder[] = this.store.queued();
    let head = 0;
    const batch: Batch = { rows: [], done: [], found: [], since: Date.now() };
    const active = new Set<Promise<void>>();
    const state = { firstError: '' };
    try {
      while (!this.halt) {
        while (active.size < LISTINGS_IN_FLIGHT && head < frontier.length) {
          const p: Promise<void> = this.listOne(job, frontier[head++]!, signal, frontier, batch, state).finally(() => active.delete(p));
          active.add(p);
        }
        if (active.size === 0) break;
        await Promise.race(active);
        if (batch.rows.length >= BATCH_ROWS || Date.now() - batch.since >= BATCH_MS) this.commit(job, batch);
        // Let requests in between folders: a storage answering from memory never yields by itself.
        await nextTurn();
      }
    } finally {
      // Whatever was listed is kept, even when the job pauses or a listing threw unexpectedly;
      // folders still in flight stay queued and are listed again by a resumed job.
      await Promise.allSettled(active);
      this.commit(job, batch);
    }
    if (this.halt !== 'pause') this.finish(job, state.firstError);
  }

  /** List one folder into the batch; a halted job leaves it queued. */
  private async listOne(job: JobSpec, f: Folder, signal: AbortSignal, frontier: Folder[], batch: Batch, state: { firstError: string }): Promise<void> {
    let entries: readonly Entry[] = [];
    try {
      entries = (await this.vfs.list(indexerContext(signal), f.path)).entries;
      // A job's own starting folders are indexed too (their rows were dropped with their subtrees).
      if (f.depth === 0 && segments(f.path).length > 0) entries = [await this.vfs.stat(indexerContext(signal), f.path), ...entries];
    } catch (err) {
      if (this.halt) return; // keep the folder queued: a resumed job lists it again
      if (f.depth === 0 && !state.firstError) state.firstError = err instanceof Error ? err.message : String(err);
      this.log.warn({ err, path: f.path }, 'index: listing failed, folder skipped');
    }
    if (this.halt) return;
    const ignore = [...this.scope.ignorePaths(), ...job.ignore];
    for (const e of entries) {
      if (!this.scope.accepts(e.vpath, { ignore, depth: false })) continue;
      batch.rows.push(rowOf(e));
      if (e.vpath === f.path) continue;
      if (e.isDir && (job.maxDepth < 0 || f.depth + 1 < job.maxDepth)) {
        const sub: Folder = { path: e.vpath, depth: f.depth + 1 };
        frontier.push(sub);
        batch.found.push(sub);
      }
    }
    batch.done.push(f);
  }

  /**
   * Write the batch in one transaction: its rows, the folders it found (queued unless already
   * listed in this same batch), the folders it listed taken off the queue, and the progress —
   * so the file always holds a consistent frontier to resume from.
   */
  private commit(job: JobSpec, batch: Batch): void {
    if (batch.done.length > 0 || batch.found.length > 0) {
      const done = new Set(batch.done);
      this.store.tx(() => {
        this.store.upsert(batch.rows);
        for (const f of batch.found) if (!done.has(f)) f.id = this.store.enqueue(f.path, f.depth);
        for (const f of batch.done) if (f.id !== undefined) this.store.dequeue(f.id);
        if (job.kind === 'build') {
          const p = this.progress();
          this.store.setState('progress', { ...p, obj_count: p.obj_count + batch.rows.length });
        }
      });
    }
    batch.rows = [];
    batch.done = [];
    batch.found = [];
    batch.since = Date.now();
  }

  private finish(job: JobSpec, error: string): void {
    this.store.tx(() => {
      this.store.clearQueue();
      this.store.setState('job', null);
      if (job.kind === 'build') {
        this.store.setState('progress', { ...this.progress(), is_done: true, last_done_time: new Date().toISOString(), error });
      }
    });
  }
}
