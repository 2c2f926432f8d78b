/**
 * As-Task uploads (alist-compat §10): the request body is first spooled to a temp file, the reply
 * carries the task (state 0, `uploading`), and a worker then puts the file through the VFS. The
 * temp file goes on every outcome (a retried task then fails at once, asking for a new upload).
 * Not resumable: a restart fails the task (`interrupted by a restart`) and removes its temp file,
 * since the client has long been told "accepted".
 * The task keeps the storage its folder resolved to at the request and fails (no retry) when the
 * path no longer resolves to it (storage deleted meanwhile), rather than writing elsewhere.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join as hostJoin } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { AccessContext } from '../auth/principal.js';
import { VfsError } from '../errors.js';
import { basename, parent } from '../paths.js';
import type { TaskRecord } from '../store/types.js';
import type { PutOptions, VfsApi } from '../vfs/types.js';
import { FatalTaskError } from './failures.js';
import { checkRoom, ownUndone } from './retention.js';
import type { TaskManager } from './manager.js';
import type { KindRunner, TaskInfo } from './types.js';
import { fmtWhere, pinStorage, storagePin, whereOf } from './where.js';

export interface UploadRequest {
  path: string;
  size?: number;
  modified?: Date;
  overwrite?: boolean;
  hashes?: Record<string, string>;
}

const tempOf = (rec: TaskRecord) => (typeof rec.args.tmp === 'string' ? rec.args.tmp : undefined);

export class Uploads {
  constructor(private readonly tasks: TaskManager, private readonly vfs: VfsApi, private readonly tempRoot: string) {}

  runner(): KindRunner {
    const cleanup = async (rec: TaskRecord) => {
      const tmp = tempOf(rec);
      if (tmp) await rm(tmp, { force: true });
    };
    return {
      resumable: false,
      run: async (t) => {
        const a = t.args;
        const tmp = String(a.tmp);
        // The spooled body goes when the task ends, whatever the outcome: a retry has nothing to put.
        if (!(await stat(tmp).then(() => true, () => false))) throw new FatalTaskError('the uploaded data is gone: upload the file again');
        const pin = storagePin(a.storage);
        const check = () => pinStorage(this.vfs, t.ctx, parent(String(a.path)), pin, 'destination');
        await check();
        const size = typeof a.size === 'number' ? a.size : undefined;
        const opts: PutOptions = {
          size,
          modified: typeof a.modified === 'string' ? new Date(a.modified) : undefined,
          overwrite: a.overwrite !== false,
          hashes: (a.hashes as Record<string, string> | undefined) ?? undefined,
          onProgress: (b) => t.setProgress(size ? (b * 100) / size : 0),
          // Only into that storage, aborted if it is deleted, disabled or changed while the file goes in.
          onlyOn: pin && { id: pin.id, mountPath: pin.mount },
        };
        const body = createReadStream(tmp);
        try {
          await this.vfs.put(t.ctx, String(a.path), body, opts).catch(async (e: unknown) => {
            await check(); // the storage gone: fail naming it
            throw e;
          });
        } finally {
          // A put refused before reading (target now a folder, write taken away) leaves the stream
          // open: its descriptor, and the removed temp file's disk space, were held for good.
          body.destroy();
        }
      },
      finished: cleanup,
      abandoned: cleanup,
    };
  }

  /** Sweep temp files left by a crash (called at start, before tasks resume). */
  async sweep(): Promise<void> {
    await rm(hostJoin(this.tempRoot, 'upload'), { recursive: true, force: true });
  }

  /**
   * Check what can be checked now (storage accepts uploads, write permission, existing target),
   * spool the body, then create the task. Errors are VfsErrors like a direct vfs.put's.
   */
  async start(ctx: AccessContext, body: Readable, req: UploadRequest): Promise<TaskInfo> {
    const dir = parent(req.path);
    const storage = await this.vfs.storageOf(ctx, dir);
    if (!storage || !storage.capabilities.canPut) throw new VfsError('NOT_SUPPORTED', 'upload not supported');
    if (!(await this.vfs.facts(ctx, dir)).write) throw new VfsError('READ_ONLY');
    if (req.overwrite === false) {
      const exists = await this.vfs.stat(ctx, req.path).then(() => true, (e: unknown) => (e instanceof VfsError && e.code === 'NOT_FOUND' ? false : Promise.reject(e)));
      if (exists) throw new VfsError('EXISTS', 'file exists');
    }
    // Before the body is spooled: refused only by create(), it was spooled to disk for nothing.
    checkRoom(ctx.principal, () => this.tasks.infos(ownUndone(ctx.principal.userId)).length);
    const spool = hostJoin(this.tempRoot, 'upload');
    await mkdir(spool, { recursive: true, mode: 0o700 });
    const tmp = hostJoin(spool, randomBytes(12).toString('hex'));
    try {
      await pipeline(body, createWriteStream(tmp, { mode: 0o600 }), { signal: ctx.signal });
    } catch (e) {
      await rm(tmp, { force: true });
      throw e instanceof VfsError ? e : new VfsError('UPSTREAM', 'upload interrupted', { cause: e });
    }
    const size = req.size ?? (await stat(tmp)).size;
    const p = ctx.principal;
    const name = `upload ${basename(req.path)} to ${fmtWhere(await whereOf(this.vfs, ctx, dir))}`;
    return this.tasks.create('upload', { id: p.userId, username: p.username, role: p.role }, name, {
      path: req.path, storage: { id: storage.id, mount: storage.mountPath }, tmp, size, modified: req.modified?.toISOString(), overwrite: req.overwrite !== false,
      hashes: req.hashes, ip: ctx.ip,
    }, ctx.password) // the put runs later and checks the path password again
      // No task, no one to remove the spooled body (tasks made meanwhile took the last places).
      .catch(async (e: unknown) => {
        await rm(tmp, { force: true }).catch(() => undefined);
        throw e;
      });
  }
}
