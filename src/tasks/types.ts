/**
 * Task vocabulary shared by the manager, the task kinds and the REST adapter: AList 3.45's task
 * states (xhofe/tache), its kinds and their default worker counts / retry limits (alist-compat §11).
 */
import type { AccessContext } from '../auth/principal.js';
import type { TaskRecord } from '../store/types.js';

export const TASK_STATE = {
  PENDING: 0,
  RUNNING: 1,
  SUCCEEDED: 2,
  CANCELING: 3,
  CANCELED: 4,
  ERRORED: 5,
  FAILING: 6,
  FAILED: 7,
  WAITING_RETRY: 8,
  BEFORE_RETRY: 9,
} as const;

/** States AList's `done` route lists; everything else is `undone`. */
export const DONE_STATES: ReadonlySet<number> = new Set([TASK_STATE.SUCCEEDED, TASK_STATE.CANCELED, TASK_STATE.FAILED]);

export const TASK_KINDS = ['upload', 'copy', 'offline_download', 'offline_download_transfer', 'decompress', 'decompress_upload'] as const;
export type TaskKind = (typeof TASK_KINDS)[number];

export const isTaskKind = (k: string): k is TaskKind => (TASK_KINDS as readonly string[]).includes(k);

/** AList's config.json `tasks` defaults: workers and max_retry per kind. */
export const KIND_DEFAULTS: Record<TaskKind, { workers: number; maxRetry: number }> = {
  upload: { workers: 5, maxRetry: 0 },
  copy: { workers: 5, maxRetry: 2 },
  offline_download: { workers: 5, maxRetry: 1 },
  offline_download_transfer: { workers: 5, maxRetry: 2 },
  decompress: { workers: 5, maxRetry: 2 },
  decompress_upload: { workers: 5, maxRetry: 2 },
};

/** What the work of one task sees: its record's arguments, a context for VFS calls, and setters. */
export interface TaskHandle {
  readonly id: string;
  readonly kind: TaskKind;
  readonly args: Record<string, unknown>;
  /** The creator's principal (re-read from the store at every run), signal included. */
  readonly ctx: AccessContext;
  readonly signal: AbortSignal;
  setStatus(status: string): void;
  /** 0..100 */
  setProgress(progress: number): void;
  setTotalBytes(n: number): void;
  /** Merge into the record's args (persisted with the next write), e.g. a tool's download id. */
  patchArgs(patch: Record<string, unknown>): void;
  /** Start a child task of any kind with the same creator; returns its id. */
  spawn(kind: TaskKind, name: string, args: Record<string, unknown>): Promise<string>;
  /** Ids of the undone-or-done children this task spawned earlier (resume skips them). */
  children(): TaskRecord[];
}

/** One task kind's behaviour. */
export interface KindRunner {
  run(t: TaskHandle): Promise<void>;
  /**
   * After a restart, may an unfinished task of this kind run again from its args? Those that
   * cannot are marked failed with `interrupted by a restart`.
   */
  resumable: boolean;
  /** Called once when the task reaches succeeded, canceled or failed (cleanup such as delete_policy). */
  finished?(rec: TaskRecord): Promise<void>;
  /** Called when a task that will not run again is dropped at start-up (e.g. remove its temp file). */
  abandoned?(rec: TaskRecord): Promise<void>;
}

/** AList's TaskInfo JSON (times formatted by the adapter): the public part of a TaskRecord. */
export type TaskInfo = Pick<
  TaskRecord,
  'id' | 'name' | 'creator' | 'creator_role' | 'state' | 'status' | 'progress' | 'start_time' | 'end_time' | 'total_bytes' | 'error'
>;
