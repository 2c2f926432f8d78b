/**
 * The task manager: AList's tache, as one object built by the server. Every task is a TaskRecord
 * kept in memory and written through store.tasks on each state change (progress is written at most
 * once per `progressSaveMs`), so a restart finds finished tasks still listed and unfinished ones
 * either resumed from their args (kinds marked resumable) or failed with `interrupted by a restart`.
 *
 * Each kind has its own worker pool (a FIFO queue and a concurrency limit) and retry limit. Work
 * runs with the creator's principal, re-read from the store at every run, so a user disabled or
 * deleted meanwhile stops their tasks. Cancel aborts the work's AbortSignal, and cancels every
 * queued or running descendant (a folder copy finishes once it has spawned its children, so the
 * tree must be followed through finished tasks too).
 *
 * A pool's limit is read at every scheduling decision (the `limit` option, e.g. the
 * `*_task_threads_num` settings), so a change applies to the next start; refreshLimits() lets
 * newly allowed workers start at once.
 */
import type { Logger } from 'pino';
import type { Accounts } from '../auth/accounts.js';
import { principalOf } from '../auth/accounts.js';
import type { Store } from '../store/store.js';
import type { TaskRecord, UserRecord } from '../store/types.js';
import { isFatal, logFailure, shownError } from './failures.js';
import { taskId } from './ids.js';
import { initialStatus, toInfo } from './info.js';
import { checkRoom, countUndone, forgettable, KEEP_FINISHED } from './retention.js';
import { DONE_STATES, KIND_DEFAULTS, TASK_KINDS, TASK_STATE as S, type KindRunner, type TaskHandle, type TaskInfo, type TaskKind } from './types.js';

export const INTERRUPTED = 'interrupted by a restart';
export { toInfo }; // the routes' import

export interface TaskManagerOptions {
  store: Store;
  accounts: Accounts;
  log: Logger;
  workers?: Partial<Record<TaskKind, number>>;
  /** The current worker count of a kind (read at each scheduling step); undefined: `workers`/default. */
  limit?: (kind: TaskKind) => number | undefined;
  maxRetry?: Partial<Record<TaskKind, number>>;
  /** Wait before a retry; grows linearly with the attempt. */
  retryDelayMs?: number;
  progressSaveMs?: number;
  /** How many finished tasks are kept, the most recently finished; older ones are forgotten. */
  keepFinished?: number;
}

/** Why a running task's signal was aborted: a user's cancel, or the server stopping (resume later). */
type AbortWhy = 'cancel' | 'shutdown';

interface Live {
  ac: AbortController;
  why?: AbortWhy;
  done: Promise<void>;
}

interface Pool {
  queue: string[];
  running: number;
  /** The fixed limit used when the `limit` option gives none. */
  limit: number;
}

export type Creator = Pick<UserRecord, 'id' | 'username' | 'role'>;

export class TaskManager {
  private readonly tasks = new Map<string, TaskRecord>();
  /** parent id → ids of the tasks it spawned (args.parent). */
  private readonly kids = new Map<string, Set<string>>();
  private readonly runners = new Map<TaskKind, KindRunner>();
  private readonly pools = new Map<TaskKind, Pool>();
  private readonly live = new Map<string, Live>();
  private readonly lastSaved = new Map<string, number>();
  /**
   * The meta path password a task was created with (an upload with a `Password` header), by task id.
   * The VFS checks the password again when the task runs, so the task must act with it as the
   * request did. Kept in memory only, never in the store: a task resumed after a restart runs
   * without it and fails on a protected path, as a request without the password would.
   */
  private readonly passwords = new Map<string, string>();
  /** The pending automatic retry of a task, by id (a cancel drops it: else a retry meanwhile queued the task twice). */
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly writes = new Set<Promise<void>>();
  /** The start-up cleanups (cleanUp): a retry or removal waits for them, not to race them for a task's files. */
  private cleanups: Promise<void> = Promise.resolve();
  private closed = false;
  /** No work starts before resume(): resumed tasks need the storages loaded first. */
  private paused = true;
  private readonly log: Logger;

  constructor(private readonly opts: TaskManagerOptions) {
    this.log = opts.log.child({ mod: 'tasks' });
    for (const k of TASK_KINDS) this.pools.set(k, { queue: [], running: 0, limit: Math.max(1, opts.workers?.[k] ?? KIND_DEFAULTS[k].workers) });
  }

  register(kind: TaskKind, runner: KindRunner): void {
    this.runners.set(kind, runner);
  }

  /** Load persisted tasks: keep finished ones, queue or fail unfinished ones. Call after register(). */
  async start(): Promise<void> {
    const all = await this.opts.store.tasks.list();
    const dropped: TaskRecord[] = [];
    // Every record is linked before any is judged: an abandoned task's cleanup asks for its
    // children (e.g. a download's transfers), which come after it in the list.
    for (const rec of all) {
      this.tasks.set(rec.id, rec);
      this.link(rec);
    }
    for (const rec of all) {
      if (DONE_STATES.has(rec.state)) continue;
      const runner = this.runners.get(rec.kind as TaskKind);
      if (runner?.resumable && rec.state !== S.CANCELING) {
        rec.state = S.PENDING;
        rec.status = 'resumed after a restart';
        this.save(rec);
        this.pools.get(rec.kind as TaskKind)?.queue.push(rec.id);
      } else {
        rec.state = rec.state === S.CANCELING ? S.CANCELED : S.FAILED;
        rec.error = INTERRUPTED;
        rec.end_time = new Date().toISOString();
        dropped.push(rec);
      }
    }
    // Not awaited: a cleanup may wait on a download tool that hangs (seconds per task), and the
    // server must not wait with it to start.
    this.cleanups = this.cleanUp(dropped);
    this.pruneFinished();
  }

  /**
   * The cleanups of tasks dropped at start-up, one after the other. Each record is written only
   * once its cleanup ran: a stop meanwhile leaves it unfinished in the store, so the next start
   * drops it, and cleans up, again.
   */
  private async cleanUp(dropped: TaskRecord[]): Promise<void> {
    for (const rec of dropped) {
      if (this.closed) return;
      const runner = this.runners.get(rec.kind as TaskKind);
      await runner?.abandoned?.(rec).catch((err: unknown) => this.log.warn({ err, id: rec.id }, 'task cleanup failed'));
      if (!this.closed) this.save(rec);
    }
  }

  /** Let the workers run (server.ts calls this once the storages are loaded). */
  resume(): void {
    this.paused = false;
    this.refreshLimits();
  }

  /** Start queued work a raised limit now allows (call after a worker-count setting changed). */
  refreshLimits(): void {
    for (const k of TASK_KINDS) this.pump(k);
  }

  /** The current worker limit of a kind. */
  limitOf(kind: TaskKind): number {
    const n = this.opts.limit?.(kind);
    if (n !== undefined && Number.isFinite(n) && n >= 1) return Math.floor(n);
    return this.pools.get(kind)!.limit;
  }

  /**
   * Records (copies), in creation order; `keep` picks them before they are copied (a front end
   * polling one kind should not copy every task of every kind each time). `keep` must not mutate.
   */
  records(keep: (r: Readonly<TaskRecord>) => boolean = () => true): TaskRecord[] {
    const out: TaskRecord[] = [];
    for (const r of this.tasks.values()) if (keep(r)) out.push(structuredClone(r));
    return out;
  }

  /**
   * What a task list shows of the records `keep` picks (TaskInfo, scalars only), in creation order.
   * A front end polls the list every second or two; with a folder copy of 20,000 files queued,
   * deep-copying each record (its arguments included) took about 0.2 s a poll.
   */
  infos(keep: (r: Readonly<TaskRecord>) => boolean): TaskInfo[] {
    const out: TaskInfo[] = [];
    for (const r of this.tasks.values()) if (keep(r)) out.push(toInfo(r));
    return out;
  }

  get(id: string): TaskRecord | undefined {
    const r = this.tasks.get(id);
    return r && structuredClone(r);
  }

  /** Create a task, persist it and queue it. The returned info is the state at creation (pending). */
  async create(kind: TaskKind, creator: Creator, name: string, args: Record<string, unknown>, password?: string): Promise<TaskInfo> {
    if (this.closed) throw new Error('task manager is stopped');
    if (typeof args.parent !== 'string') checkRoom(creator, () => countUndone(this.tasks.values(), creator.id)); // retention.ts
    const rec: TaskRecord = {
      id: taskId(), kind, name, creator: creator.username, creator_id: creator.id, creator_role: creator.role,
      state: S.PENDING, status: initialStatus(kind), progress: 0, start_time: null, end_time: null,
      total_bytes: typeof args.size === 'number' ? args.size : 0, error: '', retry_count: 0, args,
    };
    this.tasks.set(rec.id, rec);
    if (password) this.passwords.set(rec.id, password);
    this.link(rec);
    const info = toInfo(rec);
    await this.save(rec);
    this.pools.get(kind)!.queue.push(rec.id);
    // Start on the next tick so the caller's reply still shows the task as created.
    setImmediate(() => this.pump(kind));
    return info;
  }

  /**
   * Cancel a task and every unfinished descendant, through finished ones too (a folder copy has
   * succeeded once it spawned its children). Finished tasks themselves are left as they are.
   */
  async cancel(id: string): Promise<void> {
    const writes: Promise<void>[] = [];
    this.cancelTree(id, writes);
    await Promise.all(writes);
  }

  /**
   * Mark a task and its descendants canceled synchronously (a freed worker cannot start any of them
   * meanwhile, however big the tree); the returned writes finish in the background together.
   */
  private cancelTree(id: string, writes: Promise<void>[]): void {
    const rec = this.tasks.get(id);
    if (!rec) return;
    for (const childId of this.kids.get(id) ?? []) this.cancelTree(childId, writes);
    if (DONE_STATES.has(rec.state) || rec.state === S.CANCELING) return;
    const live = this.live.get(id);
    if (live) {
      rec.state = S.CANCELING;
      live.why = 'cancel';
      writes.push(this.save(rec));
      live.ac.abort(new Error('canceled'));
      return;
    }
    this.dequeue(rec);
    clearTimeout(this.timers.get(id));
    this.timers.delete(id);
    // No run to wait for its cleanup (finished): a retry or removal meanwhile waits for it as for a
    // run's end (a retry's state was else overwritten by this "canceled", the task never ran).
    let ended!: () => void;
    const end: Live = { ac: new AbortController(), why: 'cancel', done: new Promise<void>((r) => (ended = r)) };
    this.live.set(id, end);
    writes.push(this.finish(rec, S.CANCELED, 'canceled').finally(() => {
      if (this.live.get(id) === end) this.live.delete(id);
      ended();
    }));
  }

  /**
   * Requeue a failed or canceled task with a fresh retry count, and its failed or canceled
   * children (a resumed folder task skips children it already made). Other states: nothing to do.
   * The tree's writes go together, as cancel's (one by one, each cost a write and fsync).
   */
  async retry(id: string): Promise<void> {
    await this.cleanups;
    const tree = (r: TaskRecord | undefined): TaskRecord[] => (r ? [...this.childrenOf(r.id).flatMap(tree), r] : []);
    const all = tree(this.tasks.get(id));
    const again = (r: TaskRecord) => r.state === S.FAILED || r.state === S.CANCELED;
    // A run still finishing (a download's cleanup; work still cancelling or failing, once skipped:
    // retry lost) ends first: two runs of one task at once overwrote each other's state, uncancellable.
    const ending = (r: TaskRecord) => again(r) || r.state === S.CANCELING || r.state === S.FAILING;
    // Only when there is one: a yield for nothing let a clear_done that came later delete the task first.
    const runs = all.filter(ending).flatMap((r) => this.live.get(r.id)?.done ?? []);
    if (runs.length) await Promise.all(runs);
    const writes: Promise<void>[] = [];
    for (const rec of all) {
      if (!again(rec)) continue;
      Object.assign(rec, { state: S.WAITING_RETRY, error: '', status: initialStatus(rec.kind), retry_count: 0, start_time: null, end_time: null, progress: 0 });
      writes.push(this.save(rec));
      this.enqueue(rec);
    }
    await Promise.all(writes);
  }

  /** Forget a task (cancelling it first when it is still running). */
  async remove(id: string): Promise<void> {
    await this.removeMany([id]);
  }

  /**
   * Forget several tasks. The store deletes are issued together, so the store coalesces them into
   * few writes (clear_done over thousands of tasks is one or two file writes, not one each).
   * `still`: the test that picked them (e.g. finished), checked again once the waits are over: a
   * task retried meanwhile was else cancelled and deleted.
   */
  async removeMany(ids: Iterable<string>, still?: (r: Readonly<TaskRecord>) => boolean): Promise<void> {
    await this.cleanups;
    const gone: string[] = [];
    for (const id of ids) {
      const rec = this.tasks.get(id);
      if (!rec || (still && !still(rec))) continue;
      if (!DONE_STATES.has(rec.state)) await this.cancel(id);
      const live = this.live.get(id);
      if (live) await live.done;
      if (this.tasks.get(id) !== rec || (still && !still(rec))) continue;
      this.tasks.delete(id);
      this.unlink(rec);
      this.lastSaved.delete(id);
      this.passwords.delete(id);
      gone.push(id);
    }
    await Promise.all(gone.map((id) => this.track(this.opts.store.tasks.delete(id).then(() => undefined))));
  }

  /** Stop: running work is aborted and left unfinished in the store (the next start resumes it). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    const running = [...this.live.values()];
    for (const l of running) {
      l.why ??= 'shutdown';
      l.ac.abort(new Error('server stopping'));
    }
    const bound = new Promise<void>((r) => setTimeout(r, 5000).unref());
    await Promise.race([Promise.allSettled([...running.map((l) => l.done), this.cleanups]), bound]);
    await Promise.allSettled([...this.writes]);
  }

  childrenOf(id: string): TaskRecord[] {
    return [...(this.kids.get(id) ?? [])].map((k) => this.tasks.get(k)).filter((r): r is TaskRecord => r !== undefined);
  }

  private link(rec: TaskRecord): void {
    const p = rec.args.parent;
    if (typeof p !== 'string') return;
    let set = this.kids.get(p);
    if (!set) this.kids.set(p, (set = new Set()));
    set.add(rec.id);
  }

  private unlink(rec: TaskRecord): void {
    const p = rec.args.parent;
    if (typeof p !== 'string') return;
    const set = this.kids.get(p);
    set?.delete(rec.id);
    if (set && !set.size) this.kids.delete(p);
  }

  private dequeue(rec: TaskRecord): void {
    const q = this.pools.get(rec.kind as TaskKind)?.queue;
    const i = q ? q.indexOf(rec.id) : -1;
    if (q && i >= 0) q.splice(i, 1);
  }

  private enqueue(rec: TaskRecord): void {
    if (this.closed) return;
    this.pools.get(rec.kind as TaskKind)!.queue.push(rec.id);
    this.pump(rec.kind as TaskKind);
  }

  private pump(kind: TaskKind): void {
    const pool = this.pools.get(kind)!;
    while (!this.closed && !this.paused && pool.running < this.limitOf(kind) && pool.queue.length) {
      const rec = this.tasks.get(pool.queue.shift()!);
      if (!rec || (rec.state !== S.PENDING && rec.state !== S.WAITING_RETRY && rec.state !== S.BEFORE_RETRY)) continue;
      pool.running++;
      void this.execute(rec).finally(() => {
        pool.running--;
        this.pump(kind);
      });
    }
  }

  private async execute(rec: TaskRecord): Promise<void> {
    const runner = this.runners.get(rec.kind as TaskKind);
    const ac = new AbortController();
    let settle!: () => void;
    const live: Live = { ac, done: new Promise<void>((r) => (settle = r)) };
    this.live.set(rec.id, live);
    rec.state = S.RUNNING;
    rec.start_time = new Date().toISOString(); // AList sets it at each run (retries included)
    rec.error = '';
    this.save(rec);
    try {
      if (!runner) throw new Error(`no worker for task kind ${rec.kind}`);
      const user = await this.opts.accounts.byId(rec.creator_id);
      if (!user || user.disabled) throw new Error('the task creator is deleted or disabled');
      await runner.run(this.handle(rec, user, ac.signal));
      // Done even when a stop came meanwhile: left unfinished, the next start would fail it
      // (`interrupted by a restart`, its cleanup run) or redo it, though its work is complete.
      await this.finish(rec, S.SUCCEEDED, '');
    } catch (e) {
      if (live.why === 'shutdown') return; // left RUNNING in the store: resumed or failed at the next start
      const message = live.why === 'cancel' ? 'canceled' : shownError(rec, e);
      if (live.why === 'cancel') await this.finish(rec, S.CANCELED, message);
      else if (!isFatal(e) && rec.retry_count < (this.opts.maxRetry?.[rec.kind as TaskKind] ?? KIND_DEFAULTS[rec.kind as TaskKind]?.maxRetry ?? 0)) {
        rec.retry_count++;
        rec.state = S.WAITING_RETRY;
        rec.error = message;
        this.save(rec);
        const t = setTimeout(() => {
          this.timers.delete(rec.id);
          if (this.tasks.get(rec.id) === rec && rec.state === S.WAITING_RETRY) this.enqueue(rec);
        }, (this.opts.retryDelayMs ?? 1000) * rec.retry_count);
        this.timers.set(rec.id, t);
      } else {
        rec.state = S.FAILING;
        rec.error = message;
        this.save(rec);
        logFailure(rec, e, this.log);
        await this.finish(rec, S.FAILED, message);
      }
    } finally {
      this.live.delete(rec.id);
      settle();
    }
  }

  private async finish(rec: TaskRecord, state: number, error: string): Promise<void> {
    if (state === S.SUCCEEDED) rec.progress = 100;
    rec.error = error;
    rec.end_time = new Date().toISOString();
    if (state !== S.FAILED) rec.state = state;
    try {
      await this.runners.get(rec.kind as TaskKind)?.finished?.(structuredClone({ ...rec, state }));
    } catch (err) {
      this.log.warn({ err, id: rec.id }, 'task cleanup failed');
    }
    rec.state = state;
    // Not awaited: the worker slot is free as soon as the state is set (close() still waits for
    // the write). Holding it for the write made a queue of small copies one store write each;
    // released, finishes that come together share one. A finish lost to a crash is resumed.
    this.save(rec);
    this.pruneFinished();
  }

  private finishesSincePrune = 0;
  /** Forget old finished tasks (retention.ts). */
  private pruneFinished(): void {
    const keep = this.opts.keepFinished ?? KEEP_FINISHED;
    // Looking for them walks every task: once per tenth of `keep` finishes, not at each (with
    // 20,000 copies queued, a walk per finish made a folder copy quadratic).
    if (++this.finishesSincePrune < Math.ceil(keep / 10)) return;
    this.finishesSincePrune = 0;
    const old = forgettable(this.tasks, (id) => this.childrenOf(id), keep);
    if (old.length) this.removeMany(old, (r) => DONE_STATES.has(r.state)).catch((err: unknown) => this.log.warn({ err }, 'forgetting old finished tasks failed'));
  }

  private handle(rec: TaskRecord, user: UserRecord, signal: AbortSignal): TaskHandle {
    const ip = typeof rec.args.ip === 'string' ? rec.args.ip : '';
    const creator: Creator = { id: user.id, username: user.username, role: user.role };
    const password = this.passwords.get(rec.id);
    return {
      id: rec.id,
      kind: rec.kind as TaskKind,
      args: rec.args,
      ctx: { principal: principalOf(user), protocol: 'internal', ip, signal, ...(password ? { password } : {}) },
      signal,
      setStatus: (status) => {
        if (rec.status === status) return;
        rec.status = status;
        this.save(rec);
      },
      setProgress: (p) => {
        rec.progress = Math.max(0, Math.min(100, Number.isFinite(p) ? p : 100));
        this.saveThrottled(rec);
      },
      setTotalBytes: (n) => {
        rec.total_bytes = n;
        this.saveThrottled(rec);
      },
      patchArgs: (patch) => {
        Object.assign(rec.args, patch);
        this.save(rec);
      },
      spawn: async (kind, name, args) => {
        // A cancel that came while this task was spawning must not be outlived by new children.
        signal.throwIfAborted();
        return (await this.create(kind, creator, name, { ...args, ip, parent: rec.id }, password)).id;
      },
      children: () => this.childrenOf(rec.id).map((r) => structuredClone(r)),
    };
  }

  private saveThrottled(rec: TaskRecord): void {
    const now = Date.now();
    if (now - (this.lastSaved.get(rec.id) ?? 0) >= (this.opts.progressSaveMs ?? 1000)) this.save(rec);
  }

  /** Write a record (fire-and-forget safe: failures are logged, close() waits for pending writes). */
  private save(rec: TaskRecord): Promise<void> {
    if (this.tasks.get(rec.id) !== rec) return Promise.resolve(); // removed meanwhile
    this.lastSaved.set(rec.id, Date.now());
    return this.track(this.opts.store.tasks.put(structuredClone(rec)));
  }

  private track(p: Promise<void>): Promise<void> {
    const q = p.catch((err: unknown) => this.log.error({ err }, 'persisting a task failed'));
    this.writes.add(q);
    void q.finally(() => this.writes.delete(q));
    return q;
  }
}
