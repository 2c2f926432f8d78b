/**
 * The index build as a resumable background job (alist-compat §8). The job and its frontier live
 * in the index file: `queue` holds the folders still to list, and each folder is listed, written
 * and taken off the queue in one transaction — so after a crash or restart the job simply goes on
 * with what is left (re-listing at most one folder). One folder at a time, yielding between them,
 * so requests stay responsive on a small machine.
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
    let firstError = '';
    for (;;) {
      if (this.halt) break;
      const next = this.store.nextQueued();
      if (!next) break;
      let entries: readonly Entry[] = [];
      try {
        entries = (await this.vfs.list(indexerContext(signal), next.path)).entries;
        // A job's own starting folders are indexed too (their rows were dropped with their subtrees).
        if (next.depth === 0 && segments(next.path).length > 0) entries = [await this.vfs.stat(indexerContext(signal), next.path), ...entries];
      } catch (err) {
        if (this.halt) break; // keep the folder queued: a resumed job lists it again
        if (next.depth === 0 && !firstError) firstError = err instanceof Error ? err.message : String(err);
        this.log.warn({ err, path: next.path }, 'index: listing failed, folder skipped');
      }
      if (this.halt) break;
      const ignore = [...this.scope.ignorePaths(), ...job.ignore];
      const rows: IndexRow[] = [];
      const dirs: string[] = [];
      for (const e of entries) {
        if (!this.scope.accepts(e.vpath, { ignore, depth: false })) continue;
        rows.push(rowOf(e));
        if (e.vpath === next.path) continue;
        if (e.isDir && (job.maxDepth < 0 || next.depth + 1 < job.maxDepth)) dirs.push(e.vpath);
      }
      this.store.tx(() => {
        this.store.upsert(rows);
        for (const d of dirs) this.store.enqueue(d, next.depth + 1);
        this.store.dequeue(next.id);
        if (job.kind === 'build') {
          const p = this.progress();
          this.store.setState('progress', { ...p, obj_count: p.obj_count + rows.length });
        }
      });
      await nextTurn();
    }
    if (this.halt !== 'pause') this.finish(job, firstError);
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
