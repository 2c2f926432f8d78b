/**
 * Changing the tree over REST (alist-compat §10): mkdir, rename, batch_rename, regex_rename, move,
 * copy, recursive_move, remove, remove_empty_directory. Names are validated as single components
 * (decision 3); permission bits, meta write and base-path containment are the VFS's (each route
 * also checks its bit up front, as AList answers that first). Only AList's per-endpoint answers
 * are decided here (`file [x] exists`, `Empty file names`, mkdir's 500).
 */
import type { FastifyRequest } from 'fastify';
import { can, type AccessContext } from '../../../src/auth/principal.js';
import type { Core } from '../../../src/core.js';
import { isVfsError } from '../../../src/errors.js';
import { join, normalize, parent, validateName } from '../../../src/paths.js';
import { requireBit } from '../../../src/vfs/guard.js';
import type { Entry, Listing } from '../../../src/vfs/types.js';
import type { RoutePlugin } from '../route-types.js';
import { accessContext } from '../app.js';
import { ApiError, ok } from '../envelope.js';
import { bool, fields, mapCode, str, strArray, type Fields } from '../fs-common.js';
import { GoRegex } from '../go-regex.js';
import { taskJson } from './tasks.js';
import type { TaskInfo } from '../../../src/tasks/types.js';

async function exists(core: Core, ctx: AccessContext, path: string): Promise<boolean> {
  try {
    await core.vfs.stat(ctx, path);
    return true;
  } catch (e) {
    if (isVfsError(e, 'NOT_FOUND')) return false;
    throw e;
  }
}

// Each route checks its permission bit first, as AList does (fsmanage.go, fsbatch.go: right after
// binding). The VFS checks it again on each operation, but a request that never reaches one (a taken
// destination name, nothing to rename, move or prune) answered `file [x] exists` or a success to a
// user who may not do it at all.

const existsError = (name: string) => new ApiError(403, `file [${name}] exists`);

/**
 * A folder or path field these calls act on: required (the spec marks every one of them so).
 * Missing, null or '' is a 400, never the root: `{"dst_dir": "/x"}` flattened every file of every
 * storage into /x, `{}` pruned every empty folder of the tree. An explicit `/` still means the root.
 */
function reqPath(f: Fields, field: string): string {
  const v = str(f, field);
  if (v === '') throw new ApiError(400, `invalid request: ${field} is required`);
  return normalize(v);
}

/** Move or rename src → dst, answering AList's `file [name] exists` when the VFS refuses a taken name. */
function moveTo(core: Core, ctx: AccessContext, src: string, dst: string, name: string, overwrite: boolean): Promise<Entry> {
  return mapCode(() => core.vfs.moveTo(ctx, src, dst, { overwrite }), 'EXISTS', () => existsError(name));
}

function names(f: Fields): string[] {
  const list = strArray(f, 'names');
  if (list.length === 0) throw new ApiError(400, 'Empty file names');
  return list.map(validateName);
}

/**
 * Renames in one folder run one by one: refuse the batch before the first when a later pair's new
 * name would be taken by then (an entry not renamed away before it, an earlier pair's new name).
 * Found only at its turn, the earlier renames were done and the batch failed halfway.
 */
function refuseTaken(entries: Entry[], pairs: Array<[string, string]>): void {
  const taken = new Set(entries.map((e) => e.name));
  for (const [from, to] of pairs) {
    if (taken.has(to)) throw existsError(to);
    taken.delete(from);
    taken.add(to);
  }
}

/** Every file below `dir` at any depth (hidden entries and mount points excluded by the VFS / here). */
async function filesBelow(core: Core, ctx: AccessContext, dir: string, skipDir: string, out: Entry[] = [], depth = 0, mount?: string): Promise<Entry[]> {
  if (depth > 64) throw new ApiError(500, 'directory tree too deep');
  const { entries, storage } = await core.vfs.list(ctx, dir);
  // A storage mounted on a real folder is listed as that folder, not as a virtual one: its files
  // cannot move here either (they failed the request after the files before them had moved).
  if (depth > 0 && storage?.mountPath !== mount) return out;
  for (const e of entries) {
    if (e.virtual) continue;
    const p = join(dir, e.name);
    if (e.isDir) {
      if (p !== skipDir) await filesBelow(core, ctx, p, skipDir, out, depth + 1, depth ? mount : storage?.mountPath);
    } else out.push({ ...e, vpath: p }); // vpath here: the user path, what the VFS calls take
  }
  return out;
}

/**
 * Remove empty folders below `dir` (post-order, so a parent emptied by its children goes too). The
 * listing leaves out what this user may not see (meta hide) and what the driver skips (upload temp
 * files), so a folder that looks empty is removed only if the storage finds it empty (onlyEmpty);
 * otherwise it stays, as a folder with visible entries does.
 */
async function pruneEmpty(core: Core, ctx: AccessContext, dir: string, depth = 0): Promise<boolean> {
  if (depth > 64) return false;
  let listing: Listing;
  try {
    listing = await core.vfs.list(ctx, dir);
  } catch (e) {
    // A subfolder behind a path password (this request carries none) is left alone, as a hidden
    // one is: failing here stopped the walk halfway, some empty folders removed and the rest kept.
    if (depth > 0 && isVfsError(e, 'PASSWORD_REQUIRED')) return false;
    throw e;
  }
  const { entries, storage } = listing;
  let left = entries.length;
  for (const e of entries) {
    if (!e.isDir || e.virtual) continue;
    if (await pruneEmpty(core, ctx, join(dir, e.name), depth + 1)) left--;
  }
  if (depth === 0 || left > 0) return false;
  // A storage mounted on a real folder of this one is listed as that folder: its root is kept (the
  // VFS refuses to remove it, which failed the whole request halfway).
  if (storage && storage.mountPath === join(ctx.principal.basePath, dir)) return false;
  try {
    await core.vfs.remove(ctx, dir, { onlyEmpty: true });
  } catch (e) {
    if (isVfsError(e, 'NOT_EMPTY')) return false;
    throw e;
  }
  return true;
}

const routes: RoutePlugin = async (app, { core }) => {
  app.post('/api/fs/mkdir', async (req) => {
    const ctx = accessContext(req);
    // AList answers mkdir over a file with 500 `file exists` (not the 403 of rename/move).
    await mapCode(() => core.vfs.mkdir(ctx, str(fields(req), 'path')), 'EXISTS', () => new ApiError(500, 'file exists'));
    return ok();
  });

  app.post('/api/fs/rename', async (req) => {
    const f = fields(req);
    const ctx = accessContext(req);
    requireBit(can.rename(ctx.principal));
    const name = validateName(str(f, 'name'));
    const src = reqPath(f, 'path');
    const dst = join(parent(src), name);
    if (dst === src) {
      await core.vfs.stat(ctx, src);
      return ok();
    }
    const overwrite = bool(f.overwrite);
    if (!overwrite && (await exists(core, ctx, dst))) throw existsError(name);
    await moveTo(core, ctx, src, dst, name, overwrite);
    return ok();
  });

  app.post('/api/fs/batch_rename', async (req) => {
    const f = fields(req);
    const ctx = accessContext(req);
    requireBit(can.rename(ctx.principal));
    const dir = reqPath(f, 'src_dir');
    const objs = f.rename_objects ?? [];
    if (!Array.isArray(objs) || !objs.every((o) => o && typeof o === 'object' && !Array.isArray(o))) {
      throw new ApiError(400, 'invalid request: rename_objects must be an array of objects');
    }
    // Every pair is read and checked before the first rename: a bad later pair (wrong type, a path
    // for a name) renamed the earlier ones and then failed. gin binds the whole request first.
    const pairs: Array<[string, string]> = [];
    for (const rec of objs as Fields[]) {
      const from = str(rec, 'src_name');
      const to = str(rec, 'new_name');
      if (from === '' || to === '') continue;
      validateName(from);
      validateName(to);
      if (from !== to) pairs.push([from, to]);
    }
    if (pairs.length) refuseTaken((await core.vfs.list(ctx, dir)).entries, pairs);
    for (const [from, to] of pairs) await moveTo(core, ctx, join(dir, from), join(dir, to), to, false);
    return ok();
  });

  app.post('/api/fs/regex_rename', async (req) => {
    const f = fields(req);
    const ctx = accessContext(req);
    requireBit(can.rename(ctx.principal));
    const dir = reqPath(f, 'src_dir');
    const pattern = str(f, 'src_name_regex'); // a non-string is a 400, not a regexp error
    // Go's empty pattern matches every name: a missing field would rename the whole folder.
    if (pattern === '') throw new ApiError(400, 'invalid request: src_name_regex is required');
    let re: GoRegex;
    try {
      re = GoRegex.compile(pattern);
    } catch (e) {
      throw new ApiError(500, (e as Error).message);
    }
    const template = str(f, 'new_name_regex');
    // Every new name is checked before the first rename (one that is no name renamed the others first).
    const pairs: Array<[string, string]> = [];
    const { entries } = await core.vfs.list(ctx, dir);
    for (const e of entries) {
      if (e.virtual || !re.test(e.name)) continue;
      const to = re.replaceAll(e.name, template);
      if (to !== e.name) pairs.push([e.name, validateName(to)]);
    }
    refuseTaken(entries, pairs);
    for (const [from, to] of pairs) await moveTo(core, ctx, join(dir, from), join(dir, to), to, false);
    return ok();
  });

  const transfer = (kind: 'move' | 'copy') => async (req: FastifyRequest) => {
    const f = fields(req);
    const ctx = accessContext(req);
    const list = names(f);
    requireBit((kind === 'move' ? can.move : can.copy)(ctx.principal));
    const srcDir = reqPath(f, 'src_dir');
    const dstDir = reqPath(f, 'dst_dir');
    const overwrite = bool(f.overwrite);
    if (!overwrite) for (const n of list) if (await exists(core, ctx, join(dstDir, n))) throw existsError(n);
    const tasks: TaskInfo[] = [];
    for (const n of list) {
      const src = join(srcDir, n);
      const dst = join(dstDir, n);
      if (kind === 'move') await moveTo(core, ctx, src, dst, n, overwrite);
      else {
        try {
          await core.vfs.copyTo(ctx, src, dst, { overwrite });
        } catch (e) {
          if (isVfsError(e, 'EXISTS')) throw existsError(n);
          // Across storages, or where the driver cannot copy (FTP), the copy runs as a task
          // (alist-compat §10, decision 1): it streams, as AList's fallback on NotImplement does.
          if (!isVfsError(e, 'CROSS_MOUNT') && !isVfsError(e, 'NOT_SUPPORTED')) throw e;
          // The task's puts and mkdirs need the write the driver's copy does not: asked now, as WebDAV
          // does, or a user without it was answered a task that then failed `permission denied`.
          await core.vfs.checkTransfer('copy', ctx, src, dst);
          tasks.push(taskJson(await core.tasks.copy(ctx, src, dst)));
        }
      }
    }
    return tasks.length ? ok({ tasks }) : ok();
  };
  app.post('/api/fs/move', transfer('move'));
  app.post('/api/fs/copy', transfer('copy'));

  app.post('/api/fs/recursive_move', async (req) => {
    const f = fields(req);
    const ctx = accessContext(req);
    requireBit(can.move(ctx.principal));
    const srcDir = reqPath(f, 'src_dir');
    const dstDir = reqPath(f, 'dst_dir');
    const policy = str(f, 'conflict_policy');
    // Files already in dst_dir stay where they are (src_dir may be dst_dir or hold it).
    const files = (await filesBelow(core, ctx, srcDir, dstDir)).filter((e) => parent(e.vpath) !== dstDir);
    const taken = new Set<string>();
    if (policy === 'cancel' || policy === 'skip') {
      for (const e of (await core.vfs.list(ctx, dstDir)).entries) taken.add(e.name);
    }
    // cancel refuses before anything moves, also when two files of the batch share a name (AList).
    if (policy === 'cancel') {
      const seen = new Set(taken);
      for (const e of files) {
        if (seen.has(e.name)) throw existsError(e.name);
        seen.add(e.name);
      }
    }
    for (const e of files) {
      if (policy === 'skip') {
        if (taken.has(e.name)) continue;
        taken.add(e.name);
      }
      // overwrite / empty / unknown policy: AList moves anyway and lets the target be replaced.
      await moveTo(core, ctx, e.vpath, join(dstDir, e.name), e.name, policy !== 'cancel' && policy !== 'skip');
    }
    return ok(); // decision 1: `success`, not AList's `Successfully moved N file(s)`
  });

  app.post('/api/fs/remove', async (req) => {
    const f = fields(req);
    const ctx = accessContext(req);
    const list = names(f);
    requireBit(can.remove(ctx.principal));
    const dir = reqPath(f, 'dir');
    for (const n of list) {
      try {
        await core.vfs.remove(ctx, join(dir, n));
      } catch (e) {
        if (!isVfsError(e, 'NOT_FOUND')) throw e; // a missing name is silently fine (AList)
      }
    }
    return ok();
  });

  app.post('/api/fs/remove_empty_directory', async (req) => {
    const ctx = accessContext(req);
    requireBit(can.remove(ctx.principal));
    await pruneEmpty(core, ctx, reqPath(fields(req), 'src_dir'));
    return ok();
  });
};

export default routes;
