import { pipeline, type Readable } from 'node:stream';
import { VfsError } from '../../src/errors.js';
import { basename, isRootPath, isWithin, join, segments } from '../../src/paths.js';
import { INSTANCE_HEADER, type ByteRange, type CallArgs, type Driver, type DriverContext, type Link, type Obj, type PutArgs, type RemoveArgs } from '../types.js';
import { abortError, counter, destroyOnAbort, slice, isTempName, tempName, creatableName } from '../util/streams.js';
import { basicAuth, DavHttp, text, type DavResponse } from './http.js';
import type { WebDavOptions } from './index.js';
import { parseMultistatus, PROPFIND_BODY, type DavEntry } from './propfind.js';

const XML = { 'content-type': 'application/xml; charset=utf-8' };

function statusError(res: DavResponse, op: string, path: string): VfsError {
  res.body.resume();
  const s = res.status;
  if (s === 404 || s === 410) return new VfsError('NOT_FOUND', undefined, { path });
  if (s === 412) return new VfsError('EXISTS', undefined, { path });
  if (s === 401) return new VfsError('UPSTREAM', `webdav: ${op} refused: authentication failed (401)`, { path });
  if (s === 403) return new VfsError('FORBIDDEN', `webdav: ${op} forbidden by the server`, { path });
  if (s === 507) return new VfsError('NO_SPACE', undefined, { path });
  // The server does not allow the method there (a read-only share): was UPSTREAM, a 502.
  if (s === 405) return new VfsError('NOT_SUPPORTED', `webdav: ${op} not allowed by the server (405)`, { path });
  // A lock held on the server (by another client): was UPSTREAM, a 502 for what is a 423.
  if (s === 423) return new VfsError('LOCKED', `webdav: ${op} refused: the resource is locked on the server`, { path });
  // treegate's /dav answers 508 to a request carrying its own instance id: this storage mounts the
  // very server it runs in (directly or through one of its mounts), which would recurse forever.
  if (s === 508) return new VfsError('INVALID', 'webdav: the address leads back to this treegate itself (508 Loop Detected); refusing to mount it', { path });
  return new VfsError('UPSTREAM', `webdav: ${op} failed with HTTP ${s}`, { path });
}

export class WebDavDriver implements Driver {
  private readonly http: DavHttp;
  private readonly base: URL;
  private readonly rootSegs: string[];

  constructor(private readonly opts: WebDavOptions, private readonly ctx: DriverContext) {
    try {
      this.base = new URL(opts.address.replace(/\/+$/, '') + '/');
    } catch (e) {
      throw new VfsError('INVALID', `bad address ${JSON.stringify(opts.address)}`, { cause: e });
    }
    this.rootSegs = segments(opts.root_folder_path || '/');
    const fixed: Record<string, string> = ctx.instanceId ? { [INSTANCE_HEADER]: ctx.instanceId } : {};
    this.http = new DavHttp(this.base.origin, basicAuth(opts.username, opts.password), opts.tls_insecure_skip_verify, fixed);
    if (opts.vendor === 'sharepoint') ctx.log.warn('webdav vendor sharepoint: cookie login is not implemented; using Basic auth');
  }

  /** The URL of a driver path; folders end with `/` (several servers insist on it). */
  private url(path: string, isDir: boolean): URL {
    const segs = [...this.rootSegs, ...segments(path)];
    const enc = segs.map(encodeURIComponent).join('/');
    return new URL(enc + (isDir && segs.length ? '/' : ''), this.base);
  }

  private async propfind(path: string, depth: 0 | 1, isDir: boolean, signal?: AbortSignal): Promise<DavEntry[]> {
    const url = this.url(path, isDir);
    const res = await this.http.request('PROPFIND', url, { headers: { depth: String(depth), ...XML }, body: PROPFIND_BODY, signal, follow: true });
    // 409: a parent of the path is a file (treegate's /dav, Apache), so nothing is there; was UPSTREAM, a 502.
    if (res.status === 409) throw new VfsError('NOT_FOUND', undefined, { path, cause: statusError(res, 'PROPFIND', path) });
    if (res.status !== 207) throw statusError(res, 'PROPFIND', path);
    return parseMultistatus(await text(res), url);
  }

  private obj(path: string, e: DavEntry): Obj {
    const p = '/' + segments(path).join('/');
    return { name: basename(p), path: p, size: e.size, isDir: e.isDir, modified: e.modified };
  }

  async init(signal: AbortSignal): Promise<void> {
    const root = await this.get('/', { signal });
    if (!root.isDir) throw new VfsError('UPSTREAM', `root folder ${this.opts.root_folder_path} not exists`);
  }

  async drop(): Promise<void> {
    this.http.destroy();
  }

  async get(path: string, args: CallArgs): Promise<Obj> {
    const isRoot = isRootPath(path);
    const [self] = await this.propfind(path, 0, isRoot, args.signal);
    if (!self) throw new VfsError('UPSTREAM', 'webdav: empty PROPFIND answer', { path });
    return this.obj(path, self);
  }

  private async tryGet(path: string, signal?: AbortSignal): Promise<Obj | undefined> {
    try {
      return await this.get(path, { signal });
    } catch (e) {
      if (e instanceof VfsError && e.code === 'NOT_FOUND') return undefined;
      throw e;
    }
  }

  async list(dir: Obj, args: CallArgs): Promise<Obj[]> {
    if (!dir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
    const entries = await this.propfind(dir.path, 1, true, args.signal);
    const self = [...this.baseSegs(), ...this.rootSegs, ...segments(dir.path)];
    const out: Obj[] = [];
    for (const e of entries) {
      const isSelf = e.segments.length === self.length;
      if (isSelf) {
        if (!e.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
        continue;
      }
      if (e.segments.length !== self.length + 1) continue; // not a child (a confused server)
      if (isTempName(e.segments.at(-1)!)) continue;
      out.push(this.obj(join(dir.path, e.segments.at(-1)!), e));
    }
    return out;
  }

  private baseSegs(): string[] {
    return this.base.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  }

  async link(file: Obj, args: CallArgs): Promise<Link> {
    if (file.isDir) throw new VfsError('IS_A_DIR', undefined, { path: file.path });
    const cur = await this.get(file.path, args);
    if (cur.isDir) throw new VfsError('IS_A_DIR', undefined, { path: file.path });
    return { kind: 'range', size: cur.size, open: (range, signal) => this.open(file.path, range, signal) };
  }

  private async open(path: string, range: ByteRange | undefined, signal?: AbortSignal): Promise<Readable> {
    const headers: Record<string, string> = range ? { range: `bytes=${range.start}-${range.end ?? ''}` } : {};
    const res = await this.http.request('GET', this.url(path, false), { headers, signal, follow: true });
    if (res.status === 416) {
      res.body.resume();
      throw new VfsError('INVALID', 'range not satisfiable', { path });
    }
    if (res.status !== 200 && res.status !== 206) throw statusError(res, 'GET', path);
    destroyOnAbort(res.body, signal);
    if (!range || res.status === 206) return res.body;
    // The server ignored Range and sent the whole file: cut the span out here.
    return slice(res.body, 0, range.start, range.end);
  }

  async mkdir(parent: Obj, name: string, args: CallArgs): Promise<Obj> {
    if (!parent.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: parent.path });
    const path = join(parent.path, creatableName(name));
    // Some servers (rclone) answer MKCOL on an existing folder with success: ask first.
    if (await this.tryGet(path, args.signal)) throw new VfsError('EXISTS', undefined, { path });
    const res = await this.http.request('MKCOL', this.url(path, true), { signal: args.signal });
    if (res.status === 405) {
      // RFC 4918's answer for an existing path, and every server's for a method it refuses there:
      // taken for EXISTS alone, a mkdir in a read-only folder ended in "object not found" (the VFS
      // looks for a folder "created concurrently").
      const err = statusError(res, 'MKCOL', path);
      throw (await this.tryGet(path, args.signal)) ? new VfsError('EXISTS', undefined, { path }) : err;
    }
    if (res.status === 409) {
      res.body.resume();
      const p = await this.tryGet(parent.path, args.signal);
      throw new VfsError(p && !p.isDir ? 'NOT_A_DIR' : p ? 'EXISTS' : 'NOT_FOUND', undefined, { path });
    }
    if (res.status < 200 || res.status >= 300) throw statusError(res, 'MKCOL', path);
    res.body.resume();
    return { name, path, size: 0, isDir: true, modified: new Date() };
  }

  /** MOVE or COPY `from` to `to` (driver paths); Overwrite says whether a target may be replaced. */
  private async relocate(method: 'MOVE' | 'COPY', from: string, to: string, isDir: boolean, overwrite: boolean, signal?: AbortSignal): Promise<void> {
    const headers: Record<string, string> = { destination: this.url(to, isDir).href, overwrite: overwrite ? 'T' : 'F' };
    if (isDir) headers.depth = 'infinity';
    const res = await this.http.request(method, this.url(from, isDir), { headers, signal });
    if (res.status >= 200 && res.status < 300) return void res.body.resume();
    if (res.status === 412) throw statusError(res, method, to);
    // Servers disagree on the status for a missing source (404, 403, 409): look before blaming.
    const err = statusError(res, method, from);
    if (!(await this.tryGet(from, signal))) throw new VfsError('NOT_FOUND', undefined, { path: from });
    // A taken target explains the failure only when it was not to be replaced: an upload's MOVE onto
    // the file it replaces (refused for a lock, a permission) answered "file exists" (REST 403, WebDAV 405).
    if (!overwrite && (await this.tryGet(to, signal))) throw new VfsError('EXISTS', undefined, { path: to });
    // 409 is RFC 4918's answer for a missing target folder; rclone (x/net/webdav) answers 403, which was FORBIDDEN.
    const toDir = '/' + segments(to).slice(0, -1).join('/');
    if (res.status === 409 || !(await this.tryGet(toDir, signal).then(Boolean, () => true))) throw new VfsError('NOT_FOUND', undefined, { path: toDir });
    throw err;
  }

  async put(dstDir: Obj, stream: Readable, args: PutArgs): Promise<Obj> {
    if (!dstDir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dstDir.path });
    const path = join(dstDir.path, creatableName(args.name));
    if ((await this.tryGet(path, args.signal))?.isDir) throw new VfsError('IS_A_DIR', undefined, { path });
    const tmp = join(dstDir.path, tempName(args.name));
    const count = counter(args.size, args.onProgress);
    pipeline(stream, count, () => undefined); // a source error destroys `count`, which aborts the PUT
    const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
    if (args.size !== undefined) headers['content-length'] = String(args.size);
    try {
      const res = await this.http.request('PUT', this.url(tmp, false), { headers, body: count, signal: args.signal });
      if (res.status === 409) {
        // RFC 4918's answer for a PUT into a missing folder (Apache, treegate's /dav): was UPSTREAM, a 502.
        const err = statusError(res, 'PUT', path);
        const d = await this.tryGet(dstDir.path, args.signal).catch(() => dstDir);
        throw d ? (d.isDir ? err : new VfsError('NOT_A_DIR', undefined, { path: dstDir.path })) : new VfsError('NOT_FOUND', undefined, { path: dstDir.path });
      }
      if (res.status < 200 || res.status >= 300) throw statusError(res, 'PUT', path);
      res.body.resume();
      if (count.errored) throw count.errored;
      await this.relocate('MOVE', tmp, path, false, !args.noReplace, args.signal); // Overwrite: F → 412 when taken
    } catch (e) {
      stream.destroy();
      await this.discard(tmp);
      if (args.signal?.aborted) throw abortError(args.signal);
      throw count.errored instanceof VfsError ? count.errored : e;
    }
    // What the server stored (its getlastmodified), not our clock's time: see S3Driver.put.
    const stored = await this.tryGet(path, args.signal).catch(() => undefined);
    return stored ?? { name: args.name, path, size: count.bytes, isDir: false, modified: new Date() };
  }

  /**
   * Remove a failed upload's temp file. A server that streams to disk may still be finishing the
   * broken PUT when our DELETE arrives, so look again a few times (bounded: about a second).
   */
  private async discard(tmp: string): Promise<void> {
    for (let i = 0; i < 5; i++) {
      await this.http.request('DELETE', this.url(tmp, false)).then((r) => r.body.resume(), () => undefined);
      await new Promise((r) => setTimeout(r, 50 * (i + 1)));
      if (!(await this.tryGet(tmp).catch(() => undefined))) return;
    }
    this.ctx.log.warn({ path: tmp }, 'webdav: could not remove a failed upload\'s temp file');
  }

  private async transfer(method: 'MOVE' | 'COPY', obj: Obj, dst: string, signal?: AbortSignal): Promise<Obj> {
    if (obj.isDir && isWithin(obj.path, dst)) throw new VfsError('INVALID', 'the destination folder is a subfolder of the source folder');
    await this.relocate(method, obj.path, dst, obj.isDir, false, signal);
    return { ...obj, name: basename(dst), path: dst };
  }

  rename(obj: Obj, newName: string, args: CallArgs): Promise<Obj> {
    return this.transfer('MOVE', obj, join(segments(obj.path).slice(0, -1).join('/'), creatableName(newName)), args.signal);
  }

  move(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj> {
    return this.transfer('MOVE', obj, join(dstDir.path, obj.name), args.signal);
  }

  copy(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj> {
    return this.transfer('COPY', obj, join(dstDir.path, obj.name), args.signal);
  }

  async remove(obj: Obj, args: RemoveArgs): Promise<void> {
    // DELETE is always recursive: onlyEmpty can only go by what the server's PROPFIND shows.
    if (args.onlyEmpty && obj.isDir && (await this.list(obj, args)).length) throw new VfsError('NOT_EMPTY', undefined, { path: obj.path });
    const res = await this.http.request('DELETE', this.url(obj.path, obj.isDir), { signal: args.signal });
    if (res.status < 200 || res.status >= 300) throw statusError(res, 'DELETE', obj.path);
    res.body.resume();
  }
}
