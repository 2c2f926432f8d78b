/**
 * Offline downloads (alist-compat §12): `add` checks and creates one offline_download task per URL;
 * that task has its tool download into DATA/temp/<tool>/<task id>/, then starts one
 * offline_download_transfer task per top-level entry (a folder expands into child transfers), each
 * putting its file into the target folder through the VFS with the creator's principal.
 *
 * Temp files: delete_policy is applied per transferred file when its task ends (and to what a
 * folder's failed or cancelled transfer handed to no child transfer); a failed or
 * cancelled download removes its folder at once; at start-up every temp folder no task refers to
 * is swept. Downloads are not resumable (the tool's job may be gone); transfers are.
 *
 * Like copy and upload tasks, both keep the storage the target folder resolved to when the
 * download was added, and fail (no retry) once the path no longer resolves to it (storage deleted
 * meanwhile), rather than writing into whatever storage serves the path now (e.g. the root).
 */
import { constants as fsConstants } from 'node:fs';
import { lstat, mkdir, open, readdir, rm, rmdir } from 'node:fs/promises';
import { basename as hostBase, dirname as hostDir, join as hostJoin, relative as hostRelative, sep as hostSep } from 'node:path';
import type { Logger } from 'pino';
import { can, type AccessContext } from '../../auth/principal.js';
import { VfsError } from '../../errors.js';
import { join } from '../../paths.js';
import type { Settings } from '../../settings/settings.js';
import type { TaskRecord } from '../../store/types.js';
import type { VfsApi } from '../../vfs/types.js';
import { FatalTaskError } from '../failures.js';
import { checkRoom, ownUndone } from '../retention.js';
import type { TaskManager } from '../manager.js';
import { TASK_STATE, type KindRunner, type TaskHandle, type TaskInfo } from '../types.js';
import { fmtWhere, pinStorage, storagePin, whereOf } from '../where.js';
import { Aria2Tool } from './aria2.js';
import { EgressProxy } from './egress-proxy.js';
import { QbittorrentTool } from './qbittorrent.js';
import { resolveRedirects, SimpleHttpTool } from './simple-http.js';
import { SsrfGuard } from './ssrf.js';
import type { DownloadJob, OfflineTool } from './tool.js';

export const DELETE_POLICIES = ['delete_on_upload_succeed', 'delete_on_upload_failed', 'delete_never', 'delete_always'] as const;

export interface AddRequest {
  urls: string[];
  path: string;
  tool: string;
  delete_policy: string;
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');

/**
 * Longest URL a download takes (characters). Each is kept twice in its task record (args and name),
 * in memory and in tasks.jsonl, for as long as the task is listed: a 1 MiB URL made a 2 MB record,
 * and a user's 10,000 unfinished tasks (MAX_UNDONE_PER_USER) 20 GB. Magnet links with dozens of
 * trackers stay far below it.
 */
export const MAX_URL_CHARS = 16 * 1024;

/**
 * Most files and folders one download may hand to transfers. Each becomes a transfer task (a record
 * in memory and in tasks.jsonl, a worker's turn), MAX_UNDONE_PER_USER does not count a task's
 * children, and empty files cost nothing against offline_download_max_size: a torrent of about 30
 * bytes per empty file (3 MB for 100,000) made a task, and a temp file, for each, without bound.
 */
export const MAX_DOWNLOAD_ENTRIES = 10_000;

/** How many files and folders lie below `dir` (links not followed), counted up to `max` + 1. */
async function countEntries(dir: string, max: number): Promise<number> {
  let n = 0;
  const folders = [dir];
  for (let d = folders.pop(); d !== undefined && n <= max; d = folders.pop()) {
    for (const e of await readdir(d, { withFileTypes: true })) {
      n++;
      if (e.isDirectory()) folders.push(hostJoin(d, e.name));
    }
  }
  return n;
}

/** Should the temp file go, given the policy and how its transfer ended. Unknown policy: keep (AList). */
function shouldDelete(policy: string, succeeded: boolean): boolean {
  if (policy === 'delete_always') return true;
  return succeeded ? policy === 'delete_on_upload_succeed' : policy === 'delete_on_upload_failed';
}

export class Offline {
  readonly guard: SsrfGuard;
  private readonly egress: EgressProxy;
  private readonly tools: OfflineTool[];

  constructor(
    private readonly tasks: TaskManager,
    private readonly vfs: VfsApi,
    private readonly settings: Settings,
    private readonly tempRoot: string,
    log: Logger,
    pollMs = 1000,
  ) {
    this.guard = new SsrfGuard(() => settings.bool('offline_download_allow_private'));
    const max = () => settings.number('offline_download_max_size');
    this.egress = new EgressProxy(this.guard, log);
    this.tools = [new Aria2Tool(settings, pollMs, max, () => this.egress.url()), new QbittorrentTool(settings, pollMs, max), new SimpleHttpTool(this.guard, max)];
  }

  /** Stop the egress proxy (its open connections are cut; their downloads fail). */
  close(): Promise<void> {
    return this.egress.close();
  }

  tool(name: string): OfflineTool | undefined {
    return this.tools.find((t) => t.name === name);
  }

  /** Names of the tools that are ready now (the public tools list). */
  readyTools(): string[] {
    return this.tools.filter((t) => t.ready()).map((t) => t.name).sort();
  }

  /** Try each tool that needs a connection once, quietly (start-up; a daemon may be down). */
  async initQuietly(): Promise<void> {
    await Promise.allSettled(this.tools.filter((t) => !t.ready()).map((t) => t.init()));
  }

  /** set_aria2: save, connect; resolves to aria2's version. */
  async setAria2(uri: string, secret: string): Promise<string> {
    await this.settings.save({ aria2_uri: uri, aria2_secret: secret });
    return this.tool('aria2')!.init();
  }

  /**
   * set_qbit: save, then log in. A failed login rejects (AList's SetQbittorrent answers Init's error
   * with code 500): swallowed, the settings page said "ok" to a wrong address or password.
   */
  async setQbit(url: string, seedtime: string): Promise<void> {
    await this.settings.save({ qbittorrent_url: url, qbittorrent_seedtime: seedtime });
    await this.tool('qBittorrent')!.init();
  }

  /** POST /api/fs/add_offline_download. Errors are VfsErrors or Errors carrying AList's message. */
  async add(ctx: AccessContext, req: AddRequest): Promise<TaskInfo[]> {
    const p = ctx.principal;
    if (!can.offlineDownload(p)) throw new VfsError('FORBIDDEN');
    const storage = await this.vfs.storageOf(ctx, req.path);
    if (!storage || !storage.capabilities.canPut) throw new VfsError('NOT_SUPPORTED', 'upload not supported');
    if (!(await this.vfs.facts(ctx, req.path)).write) throw new VfsError('READ_ONLY');
    const target = await this.vfs.stat(ctx, req.path).catch((e: unknown) => (e instanceof VfsError && e.code === 'NOT_FOUND' ? undefined : Promise.reject(e)));
    if (target && !target.isDir) throw new VfsError('NOT_A_DIR');
    const tool = this.tool(req.tool);
    if (!tool) throw new VfsError('NOT_FOUND', `failed get tool: tool ${req.tool} not found`);
    if (!tool.ready()) {
      try {
        await tool.init();
      } catch (e) {
        // The reason names the tool's address: for the admin only (publicMessage).
        throw new VfsError('UPSTREAM', `failed init tool ${req.tool}: ${(e as Error).message}`, { cause: e, publicText: `failed init tool ${req.tool}` });
      }
    }
    // All or none: refused once some tasks were made, the request answered an error for tasks it had made.
    checkRoom(p, () => this.tasks.infos(ownUndone(p.userId)).length, req.urls.length);
    const urls: URL[] = [];
    for (const raw of req.urls) {
      if (raw.length > MAX_URL_CHARS) throw new VfsError('INVALID', `url too long: at most ${MAX_URL_CHARS} characters`);
      let url: URL;
      try {
        url = new URL(raw.trim());
      } catch {
        throw new VfsError('INVALID', `invalid url: ${raw}`);
      }
      if (!tool.schemes.includes(url.protocol)) throw new VfsError('INVALID', `tool ${tool.name} does not support ${url.protocol} URLs`);
      await this.guard.checkUrl(url);
      urls.push(url);
    }
    // As the user sees it (AList names the full path, base path included: not the user's business).
    const dstFull = join('/', req.path);
    const creator = { id: p.userId, username: p.username, role: p.role };
    const out: TaskInfo[] = [];
    for (const url of urls) {
      const args = {
        url: url.href, dst: req.path, storage: { id: storage.id, mount: storage.mountPath }, tool: tool.name, delete_policy: req.delete_policy, ip: ctx.ip,
      };
      out.push(await this.tasks.create('offline_download', creator, `download ${url.href} to (${dstFull})`, args, ctx.password));
    }
    return out;
  }

  private dirOf(rec: { id: string; args: Record<string, unknown> }): string {
    return hostJoin(this.tempRoot, str(rec.args.tool) || 'SimpleHttp', rec.id);
  }

  downloadRunner(): KindRunner {
    return this.hidingTemp({
      resumable: false,
      run: async (t) => {
        // As add() did: the creator's permission as it is now (a retry, or a change while queued).
        if (!can.offlineDownload(t.ctx.principal)) throw new VfsError('FORBIDDEN');
        const tool = this.tool(str(t.args.tool));
        if (!tool) throw new Error(`failed get tool: tool ${str(t.args.tool)} not found`);
        if (!tool.ready()) await tool.init();
        await pinStorage(this.vfs, t.ctx, str(t.args.dst), storagePin(t.args.storage), 'destination');
        let url = new URL(str(t.args.url));
        await this.guard.checkUrl(url);
        // What an earlier run left (a failed job, a retry's old handle) goes first; its files too,
        // unless the tool resumes from them (a retry after a failure that kept them).
        const dir = this.dirOf(t);
        await tool.forget?.(t.id, t.args, tool.rechecks === true, dir).catch(() => undefined);
        // Transfers started by an earlier run, which failed or was cancelled after them (e.g. in
        // qBittorrent's removal after seeding): the download was complete, and its job in the tool
        // is gone now. Downloading again put every file a second time, side by side with the first.
        if (t.children().length > 0) return this.startTransfers(t, dir, false);
        if (!tool.rechecks) await rm(dir, { recursive: true, force: true });
        await mkdir(dir, { recursive: true, mode: 0o700 });
        if (tool.followsRedirects && this.guard.enforced() && (url.protocol === 'http:' || url.protocol === 'https:')) {
          url = await resolveRedirects(this.guard, url, t.signal);
        }
        const job: DownloadJob = {
          id: t.id, url, dir, signal: t.signal, args: t.args, patch: t.patchArgs,
          report: (status, progress, total) => {
            t.setStatus(`[${tool.name}]: ${status}`);
            t.setProgress(progress);
            if (total !== undefined) t.setTotalBytes(total);
          },
        };
        await tool.download(job);
        await this.startTransfers(t, dir, true).catch(async (e: unknown) => {
          // Refused before any transfer: the tool's job goes with the folder (a torrent left
          // seeding files that are gone).
          if (t.children().length === 0) await tool.forget?.(t.id, t.args, false, dir).catch(() => undefined);
          throw e;
        });
        await tool.afterComplete?.(job, t.setStatus);
      },
      // A download that ends without having started transfers leaves nothing worth keeping.
      finished: async (rec) => {
        if (this.tasks.childrenOf(rec.id).length === 0) await rm(this.dirOf(rec), { recursive: true, force: true });
        // Cancelled or failed after it started its transfers (e.g. while qBittorrent seeds): the
        // tool's job goes (it was left seeding for good), its files stay for the transfers.
        else if (rec.state !== TASK_STATE.SUCCEEDED) await this.tool(str(rec.args.tool))?.forget?.(rec.id, rec.args, true, this.dirOf(rec)).catch(() => undefined);
      },
      // Its transfers (resumable) may still need the files: then only the tool's job goes.
      abandoned: async (rec) => {
        const transferring = this.tasks.childrenOf(rec.id).length > 0;
        await this.tool(str(rec.args.tool))?.forget?.(rec.id, rec.args, transferring, this.dirOf(rec)).catch(() => undefined);
        if (!transferring) await rm(this.dirOf(rec), { recursive: true, force: true });
      },
    });
  }

  /**
   * One transfer per top-level entry of the download folder, but none for an entry an earlier run
   * of the task already started one for. `fresh`: the tool has just downloaded (no file is an error).
   */
  private async startTransfers(t: TaskHandle, dir: string, fresh: boolean): Promise<void> {
    t.setStatus('offline download completed, maybe transferring');
    const names = await readdir(dir).catch((e: unknown) => (fresh ? Promise.reject(e) : []));
    if (fresh && names.length === 0) throw new Error('the download produced no file');
    if (fresh && (await countEntries(dir, MAX_DOWNLOAD_ENTRIES)) > MAX_DOWNLOAD_ENTRIES) {
      throw new FatalTaskError(`the download holds more than ${MAX_DOWNLOAD_ENTRIES} files and folders: nothing was transferred`);
    }
    const dst = str(t.args.dst);
    const dstWhere = fmtWhere(await whereOf(this.vfs, t.ctx, dst));
    const started = new Set(t.children().map((c) => c.args.src));
    for (const n of names) {
      const src = hostJoin(dir, n);
      if (started.has(src)) continue;
      await t.spawn('offline_download_transfer', `transfer [](${hostRelative(this.tempRoot, src)}) to ${dstWhere}`, {
        src, dst, storage: t.args.storage, root: dir, delete_policy: str(t.args.delete_policy),
      });
    }
  }

  transferRunner(): KindRunner {
    return this.hidingTemp({
      resumable: true,
      run: async (t) => {
        const src = str(t.args.src);
        const dst = str(t.args.dst);
        await pinStorage(this.vfs, t.ctx, dst, storagePin(t.args.storage), 'destination');
        // lstat, never stat: a torrent may carry symbolic links (BEP 47), which libtorrent 2
        // creates. Its check of their targets is lexical, so a link made below another link
        // reaches out of the download (the data folder's store.json, /etc/passwd), and one may
        // point at its own folder (copied over and over, unbounded). No link is followed: it is
        // not transferred, and says so; the rest of the download still lands. Every folder on
        // the way was checked the same way by the transfer that listed it.
        const st = await lstat(src).catch((e: unknown) => {
          // E.g. removed by delete_policy when an earlier run failed: no retry can bring it back.
          if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new FatalTaskError(`the downloaded file is gone: ${hostRelative(this.tempRoot, src)}`);
          throw e;
        });
        if (st.isSymbolicLink()) throw new FatalTaskError(`not transferred: ${hostRelative(this.tempRoot, src)} is a symbolic link`);
        if (!st.isFile() && !st.isDirectory()) throw new FatalTaskError(`not transferred: ${hostRelative(this.tempRoot, src)} is not a regular file or folder`);
        const name = hostBase(src);
        if (st.isDirectory()) {
          const target = join(dst, name);
          await this.vfs.mkdir(t.ctx, target);
          const started = new Set(t.children().map((c) => c.args.src));
          const dstWhere = fmtWhere(await whereOf(this.vfs, t.ctx, target));
          for (const n of await readdir(src)) {
            const child = hostJoin(src, n);
            if (started.has(child)) continue;
            await t.spawn('offline_download_transfer', `transfer [](${hostRelative(this.tempRoot, child)}) to ${dstWhere}`, {
              src: child, dst: target, storage: t.args.storage, root: t.args.root, delete_policy: t.args.delete_policy,
            });
          }
          return;
        }
        t.setTotalBytes(st.size);
        // O_NOFOLLOW: what is read is the file checked above, never a link that took its place.
        const body = (await open(src, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW)).createReadStream();
        try {
          await this.vfs.put(t.ctx, join(dst, name), body, {
            size: st.size, modified: st.mtime, overwrite: true, onProgress: (b) => t.setProgress(st.size ? (b * 100) / st.size : 100),
          });
        } finally {
          body.destroy();
        }
      },
      finished: (rec) => this.afterTransfer(rec),
      // Cancelling when the server stopped: canceled at the restart, its file treated as a cancel's.
      abandoned: (rec) => this.afterTransfer(rec),
    });
  }

  /**
   * The runner, its errors naming host paths below the temp root relative to it, as task names do:
   * task errors are shown to the task's creator, and where DATA lies on the host is none of theirs
   * (fs errors carry the full path, and so may a tool's message about its download folder).
   */
  private hidingTemp(runner: KindRunner): KindRunner {
    const root = this.tempRoot;
    return {
      ...runner,
      run: (t) =>
        runner.run(t).catch((e: unknown) => {
          // Defined, not assigned: some errors (DOMException) have a getter-only message.
          if (e instanceof Error && e.message.includes(root)) {
            Object.defineProperty(e, 'message', { value: e.message.replaceAll(root + hostSep, '').replaceAll(root, ''), configurable: true, writable: true });
          }
          throw e;
        }),
    };
  }

  /** Apply delete_policy to a transferred file, then remove folders it left empty up to the task's temp root. */
  private async afterTransfer(rec: TaskRecord): Promise<void> {
    const src = str(rec.args.src);
    const root = str(rec.args.root);
    if (!src || !root || !src.startsWith(root)) return;
    // lstat: a link's transfer fails (it is never followed); stat took a link to a folder for that
    // folder, and the policy below then removed its files, which other transfers still had to read.
    const st = await lstat(src).catch(() => undefined);
    const succeeded = rec.state === TASK_STATE.SUCCEEDED;
    if ((st?.isFile() || st?.isSymbolicLink()) && shouldDelete(str(rec.args.delete_policy), succeeded)) await rm(src, { force: true });
    // A folder whose transfer failed or was cancelled (e.g. its name at the target is a file): the
    // entries no child transfer took over are its files, which the policy removes too (they were
    // kept for good before, whatever the policy said).
    if (st?.isDirectory() && !succeeded && shouldDelete(str(rec.args.delete_policy), false)) {
      const taken = new Set(this.tasks.childrenOf(rec.id).map((c) => str(c.args.src)));
      for (const n of await readdir(src).catch(() => [] as string[])) {
        if (!taken.has(hostJoin(src, n))) await rm(hostJoin(src, n), { recursive: true, force: true });
      }
    }
    for (let dir = st?.isDirectory() ? src : hostDir(src); dir.startsWith(root); dir = hostDir(dir)) {
      if (!(await rmdir(dir).then(() => true, () => false))) break; // not empty (or gone): stop climbing
    }
  }

  /** Start-up: remove temp folders that no task refers to (crash leftovers). */
  async sweep(): Promise<void> {
    const keep = new Set<string>();
    for (const r of this.tasks.records()) {
      if (r.kind === 'offline_download') keep.add(this.dirOf(r));
      if (r.kind === 'offline_download_transfer') keep.add(str(r.args.root));
    }
    for (const tool of this.tools) {
      const base = hostJoin(this.tempRoot, tool.name);
      for (const id of await readdir(base).catch(() => [] as string[])) {
        const dir = hostJoin(base, id);
        if (!keep.has(dir)) await rm(dir, { recursive: true, force: true });
      }
    }
  }
}
