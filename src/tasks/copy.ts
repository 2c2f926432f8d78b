/**
 * Copy tasks: copies the VFS cannot do inside one storage (CROSS_MOUNT). A folder becomes a folder
 * at the target plus one child copy task per entry (AList's expansion), a file is streamed
 * vfs.read → vfs.put (never buffered whole; put is atomic, so a cancelled or killed copy leaves no
 * partial file under the final name). Copy only reads the source: it never deletes anything.
 * Resumable: args hold only user paths, and a resumed folder task skips entries whose child task
 * already exists.
 */
import { can, type AccessContext } from '../auth/principal.js';
import { VfsError } from '../errors.js';
import { join, parent } from '../paths.js';
import type { VfsApi } from '../vfs/types.js';
import type { Creator, TaskManager } from './manager.js';
import type { KindRunner, TaskHandle, TaskInfo } from './types.js';
import { fmtWhere, whereOf } from './where.js';

interface CopyArgs {
  src: string;
  dst: string;
}

function copyArgs(a: Record<string, unknown>): CopyArgs {
  if (typeof a.src !== 'string' || typeof a.dst !== 'string') throw new Error('bad copy task arguments');
  return { src: a.src, dst: a.dst };
}

async function copyName(vfs: VfsApi, ctx: AccessContext, src: string, dst: string): Promise<string> {
  return `copy ${fmtWhere(await whereOf(vfs, ctx, src))} to ${fmtWhere(await whereOf(vfs, ctx, parent(dst)))}`;
}

export function copyRunner(vfs: VfsApi): KindRunner {
  return {
    resumable: true,
    async run(t: TaskHandle) {
      const { src, dst } = copyArgs(t.args);
      const ctx = t.ctx;
      if (!can.copy(ctx.principal)) throw new VfsError('FORBIDDEN');
      t.setStatus('getting src object');
      const entry = await vfs.stat(ctx, src);
      if (entry.isDir) {
        t.setStatus('src object is dir, listing objs');
        await vfs.mkdir(ctx, dst);
        const { entries } = await vfs.list(ctx, src);
        const started = new Set(t.children().map((c) => c.args.src));
        const srcWhere = await whereOf(vfs, ctx, src);
        const dstWhere = fmtWhere(await whereOf(vfs, ctx, dst));
        for (const e of entries) {
          if (e.virtual) continue;
          t.signal.throwIfAborted();
          const childSrc = join(src, e.name);
          if (started.has(childSrc)) continue;
          const name = `copy [${srcWhere.mount}](${join(srcWhere.inside, e.name)}) to ${dstWhere}`;
          await t.spawn('copy', name, { src: childSrc, dst: join(dst, e.name) });
        }
        t.setStatus('src object is dir, added all copy tasks of objs');
        return;
      }
      t.setStatus('');
      t.setTotalBytes(entry.size);
      const r = await vfs.read(ctx, src);
      const stop = () => r.stream.destroy(new Error('canceled'));
      t.signal.addEventListener('abort', stop, { once: true });
      try {
        // The route refused an existing target before the task was made; a resumed task may find
        // its own earlier result there, so the copy replaces it.
        await vfs.put(ctx, dst, r.stream, {
          size: entry.size, modified: entry.modified, overwrite: true,
          onProgress: (b) => t.setProgress(entry.size > 0 ? (b * 100) / entry.size : 100),
        });
      } finally {
        t.signal.removeEventListener('abort', stop);
        if (!r.stream.destroyed) r.stream.destroy();
      }
    },
  };
}

/** Start a copy task of `src` to the full path `dst` for the caller (needs the copy bit). */
export async function startCopy(tasks: TaskManager, vfs: VfsApi, ctx: AccessContext, src: string, dst: string): Promise<TaskInfo> {
  const p = ctx.principal;
  if (!can.copy(p)) throw new VfsError('FORBIDDEN');
  await vfs.stat(ctx, src);
  const creator: Creator = { id: p.userId, username: p.username, role: p.role };
  const name = await copyName(vfs, ctx, src, dst);
  return tasks.create('copy', creator, name, { src, dst, ip: ctx.ip });
}
