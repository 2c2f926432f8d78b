/**
 * The index build as a resumable background job (alist-compat §8). The job and its frontier live
 * in the index file: `queue` holds the folders still to list. A few folders are listed at once, and
 * listed folders are written in batches: each batch's rows, the subfolders it found and the removal
 * of the folders it listed from the queue go in one transaction — so after a crash or restart the
 * job simply goes on with what is left (re-listing what was not yet written). The transactions run
 * on a writer thread (writer.ts) while the loop goes on listing; between folders the loop yields,
 * so requests stay responsive on a small machine.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import { isVfsError, VfsError } from '../errors.js';
import { parent, segments } from '../paths.js';
import type { Vfs } from '../vfs/vfs.js';
import type { Entry } from '../vfs/types.js';
import { indexerContext, rowOf, type IndexScope } from './scope.js';
import type { IndexRow, IndexStore, QueuedFolder } from './store.js';
import { BatchWriter, MAX_TX_ROWS } from './writer.js';

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
 * Listed folders are written together: a commit per folder made every small transaction flush its
 * own FTS segment, which cost more than the rows. A batch goes to the writer as soon as it is idle
 * and the batch holds MIN_ROWS (so the writer is never left waiting while rows pile up), at
 * MAX_TX_ROWS (one transaction's worth, writer.ts), or after BATCH_MS (slow storages still save
 * their progress often).
 */
const MIN_ROWS = 500;
const BATCH_MS = 200;
/**
 * Transactions sent and not yet written before listing waits: one being written and one ready, so
 * the writer never idles while memory stays bounded whatever the size of the tree.
 */
const WRITES_AHEAD = 2;
/**
 * How long the writer thread outlives a job: starting one costs ~35 ms of CPU before the first row
 * is written, which shows when jobs follow one another (a rebuild, updates of a few folders).
 */
const WRITER_IDLE_MS = 30_000;

/** A folder of the job's frontier; `id` is its queue row's (the loop numbers the folders it finds). */
type Folder = QueuedFolder;

/** Listed but not yet sent to the writer. */
interface Batch {
  rows: IndexRow[];
  /** Folders listed (taken off the queue with the batch). */
  done: Folder[];
  /** Subfolders found (queued with the batch unless listed by then). */
  found: Folder[];
  /**
   * Settles BATCH_MS after the first folder was added, setting `late`: the batch is then due even
   * while every listing in flight hangs.
   */
  timer?: Promise<void>;
  late?: boolean;
}

/** One run of the job loop. */
interface Run {
  job: JobSpec;
  signal: AbortSignal;
  frontier: Folder[];
  /** Queue id of the next folder found: the loop alone adds to the queue while it runs. */
  nextId: number;
  batch: Batch;
  firstError: string;
}

const IDLE: IndexProgress = { obj_count: 0, is_done: false, last_done_time: null, error: '' };

export class IndexBuilder {
  private loop: Promise<void> | undefined;
  private abort: AbortController | undefined;
  /** Why the loop should end: `stop` finishes the job, `pause` keeps it for a later resume. */
  private halt: 'stop' | 'pause' | undefined;
  private writer: BatchWriter | undefined;
  private writerIdle: NodeJS.Timeout | undefined;

  constructor(private readonly store: IndexStore, private readonly vfs: Vfs, private readonly scope: IndexScope, private readonly log: Logger) {}

  get running(): boolean {
    return this.loop !== undefined;
  }

  /** Paths removed (or moved away) through the VFS while a job runs, see replayRemovals. */
  private removed = new Set<string>();
  /**
   * Targets of moves and copies made through the VFS while a job runs. The updater moves or copies
   * the source's rows, but a source the job had not written yet has none: such targets are listed
   * by a follow-up update job.
   */
  private arrived = new Set<string>();

  /** The updater reports each removal; only a running job needs them. */
  noteRemoved(vpath: string): void {
    if (this.running) this.removed.add(vpath);
  }

  /**
   * Mount paths whose storage was deleted or moved away while a job runs: a listing of it made
   * before reaches the file after the updater dropped its rows (as for removed paths).
   */
  private unmounted = new Set<string>();

  /** The updater reports each storage leaving a mount path; only a running job needs them. */
  noteUnmounted(vpath: string): void {
    if (this.running) this.unmounted.add(vpath);
  }

  /**
   * Mount paths a storage came to serve (created or moved there, or edited) while a job runs: a
   * listing of the folder it covers, made before, reaches the file after the updater dropped its rows.
   */
  private mounted = new Set<string>();

  /** The updater reports each storage arriving at a mount path; only a running job needs them. */
  noteMounted(vpath: string): void {
    if (this.running) this.mounted.add(vpath);
  }

  /** The updater reports each move or copy target; only a running job needs them. */
  noteArrived(vpath: string): void {
    if (this.running) this.arrived.add(vpath);
  }

  /**
   * A folder listed before one of its entries was removed may reach the file after the updater
   * deleted that entry's row (the batch was still on its way to the writer), bringing the row
   * back. Once the job's writes have settled, every path removed meanwhile that is still gone is
   * removed again.
   */
  private async replayRemovals(): Promise<void> {
    const paths = [...this.removed];
    this.removed.clear();
    for (const vpath of paths) {
      try {
        await this.vfs.stat(indexerContext(), vpath);
      } catch (err) {
        if (isVfsError(err, 'NOT_FOUND')) this.store.removeTree(vpath);
      }
    }
    // A gone storage's path stats as a virtual folder (or not at all): drop it as the updater did,
    // unless something real serves it by now (a storage mounted there again, or the folder of the
    // storage around it, whose rows the job may have listed since).
    const gone = [...this.unmounted];
    this.unmounted.clear();
    for (const vpath of gone) {
      try {
        if (!(await this.vfs.stat(indexerContext(), vpath)).virtual) continue;
      } catch (err) {
        if (!isVfsError(err, 'NOT_FOUND')) continue;
      }
      this.store.removeTreeExcept(vpath, this.scope.mountPaths());
    }
    // Below a new mount path the job may have written the covered folder's rows, or the new
    // storage's: dropped again, and listed by the follow-up update (see launch).
    const covered = [...this.mounted];
    this.mounted.clear();
    for (const vpath of covered) {
      this.store.removeBelowExcept(vpath, this.scope.mountPaths());
      this.arrived.add(vpath);
    }
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

  /** Pause (see there) and stop the writer thread: the index file is about to be closed. */
  async close(): Promise<void> {
    await this.pause();
    clearTimeout(this.writerIdle);
    const w = this.writer;
    this.writer = undefined;
    await w?.close();
  }

  /** The writer for a run: the one left by the previous job if it is still up and sound. */
  private takeWriter(): BatchWriter {
    clearTimeout(this.writerIdle);
    if (this.writer?.failed) void this.writer.close();
    if (!this.writer || this.writer.failed) this.writer = new BatchWriter(this.store.file);
    this.writer.hold(true);
    return this.writer;
  }

  /** Keep the writer a while for a next job (not keeping the process alive meanwhile). */
  private releaseWriter(w: BatchWriter): void {
    w.hold(false);
    this.writerIdle = setTimeout(() => {
      if (this.writer !== w || this.running) return;
      this.writer = undefined;
      void w.close();
    }, WRITER_IDLE_MS).unref();
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
        const arrived = [...this.arrived].filter((p) => !this.arrived.has(parent(p)));
        this.arrived.clear();
        // A paused job resumes later and a stopped one was stopped on purpose: no follow-up then.
        if (arrived.length && !this.halt) this.start({ kind: 'update', paths: arrived, maxDepth: job.maxDepth, ignore: job.ignore });
      });
  }

  private async run(job: JobSpec, signal: AbortSignal): Promise<void> {
    const frontier: Folder[] = this.store.queued();
    const r: Run = {
      job, signal, frontier, nextId: frontier.reduce((max, f) => Math.max(max, f.id), 0) + 1,
      batch: { rows: [], done: [], found: [] }, firstError: '',
    };
    let head = 0;
    const active = new Set<Promise<void>>();
    const writer = this.takeWriter();
    try {
      try {
        while (!this.halt) {
          while (active.size < LISTINGS_IN_FLIGHT && head < frontier.length) {
            const p: Promise<void> = this.listOne(r, frontier[head++]!).finally(() => active.delete(p));
            active.add(p);
          }
          if (active.size === 0) break;
          const { batch } = r;
          if (batch.done.length > 0) {
            batch.timer ??= new Promise((resolve) => setTimeout(() => {
              batch.late = true;
              resolve();
            }, BATCH_MS).unref());
          }
          await Promise.race(batch.timer ? [...active, batch.timer] : active);
          const rows = batch.rows.length;
          if (rows >= MAX_TX_ROWS || batch.late || (rows >= MIN_ROWS && writer.queued === 0)) this.send(r, writer);
          await writer.settle(WRITES_AHEAD - 1);
          // Let requests in between folders: a storage answering from memory never yields by itself.
          await nextTurn();
        }
      } finally {
        // Whatever was listed is kept, even when the job pauses or a listing threw unexpectedly;
        // folders still in flight stay queued and are listed again by a resumed job.
        await Promise.allSettled(active);
        this.send(r, writer);
        await writer.settle();
        await this.replayRemovals();
      }
    } finally {
      this.releaseWriter(writer);
    }
    if (this.halt !== 'pause') this.finish(job, r.firstError);
  }

  /** List one folder into the batch; a halted job leaves it queued. */
  private async listOne(r: Run, f: Folder): Promise<void> {
    let entries: readonly Entry[] = [];
    try {
      entries = (await this.vfs.list(indexerContext(r.signal), f.path)).entries;
      // A job's own starting folders are indexed too (their rows were dropped with their subtrees).
      if (f.depth === 0 && segments(f.path).length > 0) entries = [await this.vfs.stat(indexerContext(r.signal), f.path), ...entries];
    } catch (err) {
      if (this.halt) return; // keep the folder queued: a resumed job lists it again
      if (f.depth === 0 && !r.firstError) r.firstError = err instanceof Error ? err.message : String(err);
      this.log.warn({ err, path: f.path }, 'index: listing failed, folder skipped');
    }
    if (this.halt) return;
    const { job, batch } = r;
    const ignore = [...this.scope.ignorePaths(), ...job.ignore];
    const accepts = this.scope.childFilter(f.path, ignore);
    const prefix = f.path === '/' ? '/' : f.path + '/';
    const deeper = job.maxDepth < 0 || f.depth + 1 < job.maxDepth;
    for (const e of entries) {
      // Children (vpath = prefix + name) are checked by name against the folder's filter; anything
      // else (the starting folder itself) by its full path.
      const child = e.vpath.length === prefix.length + e.name.length && e.vpath.startsWith(prefix) && e.vpath.endsWith(e.name);
      if (child ? !accepts(e.name) : !this.scope.accepts(e.vpath, { ignore, depth: false })) continue;
      batch.rows.push(child ? { parent: f.path, name: e.name, isDir: e.isDir, size: e.isDir ? 0 : e.size } : rowOf(e));
      if (e.vpath === f.path) continue;
      if (e.isDir && deeper) {
        const sub: Folder = { id: r.nextId++, path: e.vpath, depth: f.depth + 1 };
        r.frontier.push(sub);
        batch.found.push(sub);
      }
    }
    batch.done.push(f);
  }

  /**
   * Hand the batch to the writer, one transaction: its rows, the folders it found (queued unless
   * already listed in this same batch), the folders it listed taken off the queue, and the
   * progress — so the file always holds a consistent frontier to resume from.
   */
  private send(r: Run, writer: BatchWriter): void {
    const { batch } = r;
    if (batch.done.length > 0 || batch.found.length > 0) {
      const done = new Set(batch.done);
      const found = new Set(batch.found);
      writer.write({
        rows: batch.rows,
        enqueue: batch.found.filter((f) => !done.has(f)),
        dequeue: batch.done.filter((f) => !found.has(f)).map((f) => f.id),
        count: r.job.kind === 'build' ? batch.rows.length : 0,
      });
    }
    r.batch = { rows: [], done: [], found: [] };
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
