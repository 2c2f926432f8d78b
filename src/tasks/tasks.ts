/**
 * The task service of one treegate instance (Core.tasks): the manager with every kind registered,
 * plus the entry points adapters call: copy (cross-storage fs/copy), upload (As-Task uploads) and
 * offline (add_offline_download, tool settings). Built and started by server.ts, closed on stop.
 */
import { join as hostJoin } from 'node:path';
import type { Logger } from 'pino';
import type { Accounts } from '../auth/accounts.js';
import type { AccessContext } from '../auth/principal.js';
import type { Settings } from '../settings/settings.js';
import type { Store } from '../store/store.js';
import type { VfsApi } from '../vfs/types.js';
import { copyRunner, startCopy } from './copy.js';
import { TaskManager, type TaskManagerOptions } from './manager.js';
import { Offline } from './offline/offline.js';
import type { TaskInfo, TaskKind } from './types.js';
import { Uploads } from './upload.js';

export interface TasksOptions {
  store: Store;
  accounts: Accounts;
  settings: Settings;
  vfs: VfsApi;
  log: Logger;
  /** Host folder for temp files (DATA/temp, or a subfolder of config temp_dir: taskTempDir in config.ts). */
  tempDir: string;
  workers?: TaskManagerOptions['workers'];
  /** How often aria2 / qBittorrent are polled. */
  pollMs?: number;
}

/** AList's settings that set a kind's worker count (applied at once when changed). */
export const THREADS_SETTING: Partial<Record<TaskKind, string>> = {
  copy: 'copy_task_threads_num',
  upload: 'upload_task_threads_num',
  offline_download: 'offline_download_task_threads_num',
  offline_download_transfer: 'offline_download_transfer_task_threads_num',
};

export class Tasks {
  readonly manager: TaskManager;
  readonly uploads: Uploads;
  readonly offline: Offline;
  private unsubscribe?: () => void;

  private constructor(private readonly opts: TasksOptions) {
    const { settings } = opts;
    // Explicit `workers` (tests, embedding) win; otherwise the *_task_threads_num settings.
    const limit = (kind: TaskKind) => {
      const key = THREADS_SETTING[kind];
      if (opts.workers?.[kind] !== undefined || !key) return undefined;
      const n = settings.number(key);
      return n >= 1 ? n : undefined;
    };
    this.manager = new TaskManager({ store: opts.store, accounts: opts.accounts, log: opts.log, workers: opts.workers, limit });
    this.uploads = new Uploads(this.manager, opts.vfs, opts.tempDir);
    this.offline = new Offline(this.manager, opts.vfs, opts.settings, hostJoin(opts.tempDir), opts.log, opts.pollMs);
    this.manager.register('copy', copyRunner(opts.vfs));
    this.manager.register('upload', this.uploads.runner());
    this.manager.register('offline_download', this.offline.downloadRunner());
    this.manager.register('offline_download_transfer', this.offline.transferRunner());
  }

  /** Build, sweep temp leftovers, load persisted tasks (resuming what can be resumed). */
  static async start(opts: TasksOptions): Promise<Tasks> {
    const t = new Tasks(opts);
    await t.uploads.sweep();
    await t.manager.start();
    await t.offline.sweep();
    t.watchLimits();
    // Daemons may be down at start-up: find out in the background, never block start-up on them.
    void t.offline.initQuietly();
    return t;
  }

  /** Copy `src` to the full path `dst` as a task (fs/copy across storages). */
  copy(ctx: AccessContext, src: string, dst: string): Promise<TaskInfo> {
    return startCopy(this.manager, this.opts.vfs, ctx, src, dst);
  }

  /**
   * Settings are read synchronously at each scheduling step, so a lowered limit holds back the next
   * start at once; a raised one must start queued work without waiting for a running task to end,
   * so every settings change compares the limits.
   */
  private watchLimits(): void {
    const kinds = Object.keys(THREADS_SETTING) as TaskKind[];
    let last = kinds.map((k) => this.manager.limitOf(k)).join();
    const check = () => {
      const now = kinds.map((k) => this.manager.limitOf(k)).join();
      if (now === last) return;
      last = now;
      this.manager.refreshLimits();
    };
    this.unsubscribe = this.opts.settings.onChange(check);
  }

  async close(): Promise<void> {
    this.unsubscribe?.();
    await this.manager.close();
    await this.offline.close();
  }
}
