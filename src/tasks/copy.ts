/**
 * Copy tasks: copies the VFS cannot do inside one storage (CROSS_MOUNT). A folder becomes a folder
 * at the target plus one child copy task per entry (AList's expansion), a file is streamed
 * vfs.read → vfs.put (never buffered whole; put is atomic, so a cancelled or killed copy leaves no
 * partial file under the final name). Copy only reads the source: it never deletes anything.
 * Resumable: args hold user paths plus the storages (id and mount path) both ends resolved to
 * when the task was made; a resumed folder task skips entries whose child task already exists.
 * Every run checks that the paths still resolve to those storages and fails (no retry) when one
 * was deleted or replaced, like AList's CopyTask that holds its storages: a path resolved again
 * after its storage went would otherwise land in whatever storage now serves it (e.g. the root).
 */
import { can, type AccessContext } from '../auth/principal.js';
import { VfsError } from '../errors.js';
import { join, parent } from '../paths.js';
import type { VfsApi } from '../vfs/types.js';
import type { Creator, TaskManager } from './manager.js';
import type { KindRunner, TaskHandle, TaskInfo } from './types.js';
import { fmtWhere, pinStorage, storageGone, storagePin, whereOf, type StoragePin } from './where.js';

/** Child tasks a folder copy creates before waiting for them to be written (one store write). */
const SPAWN_BATCH = 100;

interface CopyArgs {
  src: string;
  dst: string;
  /** The storages the ends resolved to at creation (absent in tasks made by older versions). */
  src_storage?: StoragePin;
  dst_storage?: StoragePin;
}

function copyArgs(a: Record<string, unknown>): CopyArgs {
  if (typeof a.src !== 'string' || typeof a.dst !== 'string') throw new Error('bad copy task arguments');
  return { src: a.src, dst: a.dst, src_storage: storagePin(a.src_storage), dst_storage: storagePin(a.dst_storage) };
}

/**
 * Check both ends still resolve to their pinned storages (pinning them now for tasks made before
 * pins existed). Throws a FatalTaskError naming the storage that is gone.
 */
async function checkPins(vfs: VfsApi, t: TaskHandle, a: CopyArgs): Promise<{ src_storage?: StoragePin; dst_storage?: StoragePin }> {
  const src_storage = await pinStorage(vfs, t.ctx, a.src, a.src_storage, 'source');
  const dst_storage = await pinStorage(vfs, t.ctx, parent(a.dst), a.dst_storage, 'destination');
  if ((!a.src_storage && src_storage) || (!a.dst_storage && dst_storage)) t.patchArgs({ src_storage, dst_storage });
  return { src_storage, dst_storage };
}

async function copyName(vfs: VfsApi, ctx: AccessContext, src: string, dst: string): Promise<string> {
  return `copy ${fmtWhere(await whereOf(vfs, ctx, src))} to ${fmtWhere(await whereOf(vfs, ctx, parent(dst)))}`;
}

export function copyRunner(vfs: VfsApi): KindRunner {
  return {
    resumable: true,
    async run(t: TaskHandle) {
      const a = copyArgs(t.args);
      const { src, dst } = a;
      const ctx = t.ctx;
      if (!can.copy(ctx.principal)) throw new VfsError('FORBIDDEN');
      const pins = await checkPins(vfs, t, a);
      t.setStatus('getting src object');
      const entry = await vfs.stat(ctx, src);
      if (entry.isDir) {
        t.setStatus('src object is dir, listing objs');
        await vfs.mkdir(ctx, dst);
        const { entries } = await vfs.list(ctx, src);
        const started = new Set(t.children().map((c) => c.args.src));
        const srcWhere = await whereOf(vfs, ctx, src);
        const dstWhere = fmtWhere(await whereOf(vfs, ctx, dst));
        // Children are made in batches: each spawn is a store write, and spawns started together
        // share one (awaiting each in turn cost a whole-store write and fsync per entry).
        const batch: Promise<string>[] = [];
        for (const e of entries) {
          if (e.virtual) continue;
          t.signal.throwIfAborted();
          const childSrc = join(src, e.name);
          if (started.has(childSrc)) continue;
          const name = `copy [${srcWhere.mount}](${join(srcWhere.inside, e.name)}) to ${dstWhere}`;
          batch.push(t.spawn('copy', name, { src: childSrc, dst: join(dst, e.name), ...pins }));
          if (batch.length >= SPAWN_BATCH) await Promise.all(batch.splice(0));
        }
        await Promise.all(batch);
        t.setStatus('src object is dir, added all copy tasks of objs');
        return;
      }
      t.setStatus('');
      t.setTotalBytes(entry.size);
      const r = await vfs.read(ctx, src);
      try {
        await checkPins(vfs, t, { ...a, ...pins }); // again: opening the source may have taken a while
      } catch (e) {
        r.stream.destroy();
        throw e;
      }
      const stop = () => r.stream.destroy(new Error('canceled'));
      t.signal.addEventListener('abort', stop, { once: true });
      // The source storage taken out of the tree (deleted, disabled, changed) while the bytes move:
      // the copy stops (its put's body fails, landing nothing) and fails naming it. It went on
      // reading the old instance and reported the file copied from a storage the admin had removed.
      let srcGone = false;
      const unwatch = r.lease?.onWithdrawn((reason) => {
        srcGone = true;
        r.stream.destroy(reason instanceof Error ? reason : new Error(String(reason)));
      });
      try {
        // The route refused an existing target before the task was made; a resumed task may find
        // its own earlier result there, so the copy replaces it.
        // onlyOn: the put lands only in the pinned storage, and is aborted if the admin deletes,
        // disables or changes it while the bytes move (it reported success into a removed storage).
        const onlyOn = pins.dst_storage && { id: pins.dst_storage.id, mountPath: pins.dst_storage.mount };
        await vfs.put(ctx, dst, r.stream, {
          size: entry.size, modified: entry.modified, overwrite: true, onlyOn,
          onProgress: (b) => t.setProgress(entry.size > 0 ? (b * 100) / entry.size : 100),
        }).catch(async (e: unknown) => {
          if (srcGone && pins.src_storage) throw await srcFailure(vfs, ctx, a.src, pins.src_storage, e);
          await checkPins(vfs, t, { ...a, ...pins }); // a storage gone: fail naming it, without retries
          throw e;
        });
      } finally {
        unwatch?.();
        t.signal.removeEventListener('abort', stop);
        if (!r.stream.destroyed) r.stream.destroy();
      }
    },
  };
}

/**
 * Why a copy whose source's lease was withdrawn failed (`e`: its put's error). The pinned storage
 * itself taken out (deleted, disabled, changed): fatal, naming it. Another instance the bytes came
 * from (the `.balance` member the read took its turn on, an Alias's target) while the pinned
 * storage still serves: `e`, so the task is retried and reads from what serves now. It failed for
 * good naming the pinned storage, which the admin had not touched.
 */
async function srcFailure(vfs: VfsApi, ctx: AccessContext, src: string, pin: StoragePin, e: unknown): Promise<unknown> {
  const pinned = await pinStorage(vfs, ctx, src, pin, 'source').then(() => true, () => false);
  return pinned ? e : storageGone(ctx, pin, 'source');
}

/** Start a copy task of `src` to the full path `dst` for the caller (needs the copy bit). */
export async function startCopy(tasks: TaskManager, vfs: VfsApi, ctx: AccessContext, src: string, dst: string): Promise<TaskInfo> {
  const p = ctx.principal;
  if (!can.copy(p)) throw new VfsError('FORBIDDEN');
  await vfs.stat(ctx, src);
  const creator: Creator = { id: p.userId, username: p.username, role: p.role };
  const name = await copyName(vfs, ctx, src, dst);
  const src_storage = await pinStorage(vfs, ctx, src, undefined, 'source');
  const dst_storage = await pinStorage(vfs, ctx, parent(dst), undefined, 'destination');
  // A folder no storage serves (the root, with nothing mounted at `/`): the put fails there. Refused
  // now, as a missing folder is, not answered with a task failing after its retries.
  if (!dst_storage) throw new VfsError('NOT_FOUND', undefined, { path: parent(dst) });
  return tasks.create('copy', creator, name, { src, dst, src_storage, dst_storage, ip: ctx.ip }, ctx.password);
}
