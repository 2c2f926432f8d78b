import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Attributes, SFTPWrapper, Stats } from 'ssh2';
import { VfsError } from '../../src/errors.js';
import { basename, isWithin, join, segments } from '../../src/paths.js';
import type { ByteRange, CallArgs, Driver, DriverContext, Link, Obj, PutArgs, RemoveArgs } from '../types.js';
import { abortError, counter, destroyOnAbort, isTempName, tempName, creatableName } from '../util/streams.js';
import { loopCheck } from '../util/loops.js';
import { call, deadReason, expire, isConnectionLost, parseAddress, SftpConnection, sftpError, sftpStatus, whenDead } from './connection.js';
import type { SftpOptions } from './index.js';

const EOF = 1;
const NO_SUCH_FILE = 2;
const byName = (a: Obj, b: Obj) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name));

/** WRITE requests in flight per upload, and bytes per request (at most the server's limit). */
const WRITE_DEPTH = 16;
const WRITE_CHUNK = 64 * 1024;

/**
 * Write `src` to `handle` from offset 0 with up to WRITE_DEPTH requests in flight (ssh2's
 * createWriteStream waits for each WRITE's answer before sending the next). Waiting for a free
 * slot is the backpressure on the source. Small chunks are gathered into full-size requests.
 */
async function writeAll(s: SFTPWrapper, handle: Buffer, src: AsyncIterable<Buffer>): Promise<void> {
  // ssh2 learns the server's max-write-length (limits@openssh.com) but does not expose it publicly;
  // it splits larger writes itself, one after the other, so staying under it keeps all in flight.
  const known = (s as unknown as { _maxWriteLen?: unknown })._maxWriteLen;
  const size = typeof known === 'number' && known > 0 ? Math.min(known, WRITE_CHUNK) : 32 * 1024;
  const inflight = new Set<Promise<void>>();
  let failed: { e: unknown } | undefined;
  let pos = 0;
  const send = async (buf: Buffer) => {
    const p: Promise<void> = call(s, (cb) => s.write(handle, buf, 0, buf.length, pos, (err) => cb(err))).then(
      () => { inflight.delete(p); },
      (e: unknown) => { inflight.delete(p); failed ??= { e }; },
    );
    pos += buf.length;
    inflight.add(p);
    while (inflight.size >= WRITE_DEPTH && !failed) await Promise.race(inflight);
    if (failed) throw failed.e;
  };
  let pending: Buffer[] = [];
  let pendingLen = 0;
  for await (const chunk of src) {
    if (failed) throw failed.e;
    pending.push(chunk);
    pendingLen += chunk.length;
    if (pendingLen < size) continue;
    let all = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingLen);
    while (all.length >= size) {
      await send(all.subarray(0, size));
      all = all.subarray(size);
    }
    pending = all.length ? [all] : [];
    pendingLen = all.length;
  }
  if (pendingLen) await send(pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingLen));
  while (inflight.size && !failed) await Promise.race(inflight);
  if (failed) throw failed.e;
}

type Entry = { filename: string; attrs: Stats };

/**
 * Every entry of folder `remote`, one READDIR request at a time. ssh2's readdir(path) does the
 * whole folder in one callback, so the per-request deadline covered all of its round trips: a large
 * folder on a slow link failed with "no answer" (dropping the connection) while the server
 * answered every request.
 */
async function readdirAll(s: SFTPWrapper, remote: string): Promise<Entry[]> {
  const handle = await call<Buffer>(s, (cb) => s.opendir(remote, cb));
  const out: Entry[] = [];
  try {
    for (;;) {
      const batch = await call<Entry[]>(s, (cb) => s.readdir(handle, cb as never)).catch((e: unknown) => {
        if (sftpStatus(e) === EOF) return undefined;
        throw e;
      });
      if (!batch) return out;
      for (const e of batch) out.push(e);
    }
  } finally {
    await call(s, (cb) => s.close(handle, cb)).catch(() => undefined);
  }
}

/**
 * Seconds as SFTP v3 carries them (uint32: 1970 to 2106-02-07), or undefined outside that range:
 * ssh2 writes only the low 32 bits, so a time of 2200 was set as 2063, silently.
 */
function uint32SecondsOrNone(d: Date): number | undefined {
  const secs = Math.floor(d.getTime() / 1000);
  return secs >= 0 && secs <= 2 ** 32 - 1 ? secs : undefined;
}

export class SftpDriver implements Driver {
  private readonly conn: SftpConnection;
  private readonly root: string;

  constructor(private readonly opts: SftpOptions, private readonly ctx: DriverContext) {
    const { host, port } = parseAddress(opts.address);
    this.conn = new SftpConnection({
      host, port, username: opts.username, password: opts.password, privateKey: opts.private_key, passphrase: opts.passphrase,
    }, ctx.log);
    this.root = posix.normalize('/' + (opts.root_folder_path || '/'));
  }

  /** Remote path of a driver path. */
  private remote(path: string): string {
    return posix.join(this.root, ...segments(path));
  }

  private obj(path: string, a: Attributes | Stats, isDir: boolean): Obj {
    const p = '/' + segments(path).join('/');
    return { name: basename(p), path: p, size: isDir ? 0 : a.size, isDir, modified: new Date(a.mtime * 1000) };
  }

  private read<T>(path: string, fn: (s: SFTPWrapper) => Promise<T>, signal?: AbortSignal): Promise<T> {
    return this.conn.run(fn, { signal, path, idempotent: true });
  }

  private write<T>(path: string, fn: (s: SFTPWrapper) => Promise<T>, signal?: AbortSignal): Promise<T> {
    return this.conn.run(fn, { signal, path });
  }

  /** stat that answers undefined for a missing path. */
  private async tryStat(path: string, signal?: AbortSignal): Promise<Stats | undefined> {
    try {
      return await this.read(path, (s) => call<Stats>(s, (cb) => s.stat(this.remote(path), cb)), signal);
    } catch (e) {
      if (e instanceof VfsError && e.code === 'NOT_FOUND') return undefined;
      throw e;
    }
  }

  async init(signal: AbortSignal): Promise<void> {
    await this.conn.get(signal);
    const st = await this.tryStat('/', signal);
    if (!st?.isDirectory()) throw new VfsError('UPSTREAM', `root folder ${this.root} not exists`);
  }

  async drop(): Promise<void> {
    await this.conn.end();
  }

  async get(path: string, args: CallArgs): Promise<Obj> {
    const st = await this.tryStat(path, args.signal);
    if (!st) throw new VfsError('NOT_FOUND', undefined, { path });
    return this.obj(path, st, st.isDirectory());
  }

  async list(dir: Obj, args: CallArgs): Promise<Obj[]> {
    if (!dir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
    const remote = this.remote(dir.path);
    let entries;
    try {
      entries = await this.read(dir.path, (s) => readdirAll(s, remote), args.signal);
    } catch (e) {
      const st = await this.tryStat(dir.path, args.signal);
      if (!st) throw new VfsError('NOT_FOUND', undefined, { path: dir.path });
      if (!st.isDirectory()) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
      throw e;
    }
    const out: Obj[] = [];
    const realpath = (p: string) => this.read(dir.path, (s) => call<string>(s, (cb) => s.realpath(p, cb)), args.signal);
    const loops = loopCheck(remote, this.root, realpath);
    for (const { filename, attrs } of entries) {
      if (filename === '.' || filename === '..' || isTempName(filename)) continue;
      const path = join(dir.path, filename);
      if (!attrs.isSymbolicLink()) {
        out.push(this.obj(path, attrs, attrs.isDirectory()));
        continue;
      }
      let target: Stats;
      try {
        target = await this.read(path, (s) => call<Stats>(s, (cb) => s.stat(this.remote(path), cb)), args.signal);
      } catch (e) {
        if (!this.opts.ignore_symlink_error) throw new VfsError('UPSTREAM', `broken symlink ${path}`, { path, cause: e });
        continue;
      }
      // A link to this folder or one above it is left out: walks of the tree followed it without end.
      if (target.isDirectory() && (await loops(await realpath(this.remote(path))))) continue;
      out.push(this.obj(path, target, target.isDirectory()));
    }
    return out.sort(byName);
  }

  async link(file: Obj, args: CallArgs): Promise<Link> {
    if (file.isDir) throw new VfsError('IS_A_DIR', undefined, { path: file.path });
    const st = await this.tryStat(file.path, args.signal);
    if (!st) throw new VfsError('NOT_FOUND', undefined, { path: file.path });
    if (st.isDirectory()) throw new VfsError('IS_A_DIR', undefined, { path: file.path });
    const remote = this.remote(file.path);
    return {
      kind: 'range',
      size: st.size,
      open: (range?: ByteRange, signal?: AbortSignal) => this.read(file.path, async (s) => {
        // Open first so a missing file fails here, not later inside the stream.
        const handle = await call<Buffer>(s, (cb) => s.open(remote, 'r', cb));
        const rs = s.createReadStream(remote, { handle, start: range?.start, end: range?.end, highWaterMark: 256 * 1024, autoClose: true });
        // The handle is closed after the last byte; if the connection drops then, the late error
        // must not crash the process (readers have their own listeners for errors that matter).
        rs.on('error', () => undefined);
        const off = destroyOnAbort(rs, signal);
        // A read issued on a dead channel would wait forever (ssh2 buffers it): fail the stream, and
        // forget the handle, whose close could not be answered either.
        const offDead = whenDead(s, (e) => { (rs as unknown as { handle: Buffer | null }).handle = null; rs.destroy(new VfsError('UPSTREAM', `sftp: ${e.message}`, { path: file.path, cause: e })); });
        // Its READs are not made through call(), so they had no deadline: a server that stops
        // answering them (sftp-server stuck on its disk, sshd still answering keepalives) held the
        // download for good. Same deadline: a READ out that long gives the connection up.
        const r = rs as unknown as { _read(n: number): void; push(c: Buffer | null): boolean };
        const [read, push] = [r._read.bind(rs), r.push.bind(rs)];
        let unanswered: NodeJS.Timeout | undefined;
        r._read = (n) => {
          clearTimeout(unanswered);
          const ms = this.conn.requestTimeoutMs;
          unanswered = setTimeout(() => expire(s, ms), ms);
          read(n);
        };
        r.push = (c) => { clearTimeout(unanswered); return push(c); };
        rs.once('close', () => { clearTimeout(unanswered); off(); offDead(); });
        rs.once('error', offDead);
        return rs;
      }, signal),
    };
  }

  async mkdir(parent: Obj, name: string, args: CallArgs): Promise<Obj> {
    if (!parent.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: parent.path });
    const path = join(parent.path, creatableName(name));
    try {
      await this.write(path, (s) => call(s, (cb) => s.mkdir(this.remote(path), cb)), args.signal);
    } catch (e) {
      if (await this.tryStat(path, args.signal)) throw new VfsError('EXISTS', undefined, { path, cause: e });
      const p = await this.tryStat(parent.path, args.signal);
      if (!p) throw new VfsError('NOT_FOUND', undefined, { path: parent.path, cause: e });
      if (!p.isDirectory()) throw new VfsError('NOT_A_DIR', undefined, { path: parent.path, cause: e });
      throw e;
    }
    return this.get(path, args);
  }

  /** Rename with replace: OpenSSH's posix-rename when offered, else remove then rename. */
  private async replace(s: SFTPWrapper, from: string, to: string): Promise<void> {
    try {
      await call(s, (cb) => s.ext_openssh_rename(from, to, cb));
      return;
    } catch (e) {
      if (sftpStatus(e) !== undefined) throw e; // the server has the extension and refused
    }
    await call(s, (cb) => s.unlink(to, cb)).catch((e) => { if (sftpStatus(e) !== NO_SUCH_FILE) throw e; });
    await call(s, (cb) => s.rename(from, to, cb));
  }

  async put(dstDir: Obj, stream: Readable, args: PutArgs): Promise<Obj> {
    if (!dstDir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dstDir.path });
    const path = join(dstDir.path, creatableName(args.name));
    if ((await this.tryStat(path, args.signal))?.isDirectory()) throw new VfsError('IS_A_DIR', undefined, { path });
    const tmp = join(dstDir.path, tempName(args.name));
    await this.write(path, async (s) => {
      const remoteTmp = this.remote(tmp);
      let handle: Buffer | undefined;
      try {
        handle = await call<Buffer>(s, (cb) => s.open(remoteTmp, 'w', cb));
        const h = handle;
        await pipeline(stream, counter(args.size, args.onProgress), (src: AsyncIterable<Buffer>) => writeAll(s, h, src), { signal: args.signal });
        await this.keepTime(s, h, path, args.modified);
        handle = undefined;
        await call(s, (cb) => s.close(h, cb)); // every write is acknowledged before the name appears
        // noReplace: the protocol's plain RENAME, which fails when the name is taken (OpenSSH links).
        if (args.noReplace) await call(s, (cb) => s.rename(remoteTmp, this.remote(path), cb)).catch(async (e) => {
          throw (await this.tryStat(path, args.signal)) ? new VfsError('EXISTS', 'file exists', { path }) : e;
        });
        else await this.replace(s, remoteTmp, this.remote(path));
      } catch (e) {
        stream.destroy();
        const h = handle;
        if (h) await call(s, (cb) => s.close(h, cb)).catch(() => undefined);
        await call(s, (cb) => s.unlink(remoteTmp, cb)).catch((err) => {
          // The connection is gone: remove the temporary file once there is a new one.
          if (isConnectionLost(err)) this.conn.leave(remoteTmp);
        });
        if (args.signal?.aborted) throw abortError(args.signal);
        // A dead connection is rethrown as a transport error, so run() drops it; a failing source keeps it.
        if (isConnectionLost(e)) throw e;
        const dead = deadReason(s);
        if (dead) throw dead;
        throw e instanceof VfsError || sftpStatus(e) !== undefined ? sftpError(e, path) : new VfsError('UPSTREAM', 'upload failed', { path, cause: e });
      }
    }, args.signal);
    return this.get(path, args);
  }

  /**
   * Set an upload's time on its open temp file (FSETSTAT), so the file appears with it. A time SFTP
   * cannot carry is not kept (the file keeps its upload time, and says so). Neither is one the
   * server refuses (sftp-server -P fsetstat): failing the upload for it, once the file had replaced
   * the old one, made the client retry an upload that was done.
   */
  private async keepTime(s: SFTPWrapper, handle: Buffer, path: string, modified: Date | undefined): Promise<void> {
    const secs = modified && uint32SecondsOrNone(modified);
    if (secs === undefined) return;
    await call(s, (cb) => s.futimes(handle, secs, secs, cb)).catch((e: unknown) => {
      if (sftpStatus(e) === undefined) throw e; // the connection, not the server's answer
      this.ctx.log.warn({ err: e, path }, 'sftp: the server refused the upload\'s modification time; it keeps the upload time');
    });
  }

  private async setTimes(s: SFTPWrapper, path: string, modified: Date): Promise<void> {
    const secs = uint32SecondsOrNone(modified);
    if (secs === undefined) throw new VfsError('INVALID', 'an SFTP storage keeps modification times from 1970 to 2106 only', { path });
    await call(s, (cb) => s.utimes(this.remote(path), secs, secs, cb));
  }

  async setModified(obj: Obj, modified: Date, args: CallArgs): Promise<void> {
    await this.write(obj.path, (s) => this.setTimes(s, obj.path, modified), args.signal);
  }

  private async moveTo(obj: Obj, dst: string, signal?: AbortSignal): Promise<Obj> {
    if (obj.isDir && isWithin(obj.path, dst)) throw new VfsError('INVALID', 'the destination folder is a subfolder of the source folder');
    if (await this.tryStat(dst, signal)) throw new VfsError('EXISTS', `file [${basename(dst)}] exists`, { path: dst });
    await this.write(obj.path, (s) => call(s, (cb) => s.rename(this.remote(obj.path), this.remote(dst), cb)), signal);
    return this.get(dst, { signal });
  }

  rename(obj: Obj, newName: string, args: CallArgs): Promise<Obj> {
    return this.moveTo(obj, join(segments(obj.path).slice(0, -1).join('/'), creatableName(newName)), args.signal);
  }

  async move(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj> {
    if (!dstDir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dstDir.path });
    return this.moveTo(obj, join(dstDir.path, obj.name), args.signal);
  }

  /** SFTP v3 has no server-side copy: bytes are streamed back through this connection. */
  async copy(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj> {
    if (!dstDir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dstDir.path });
    const dst = join(dstDir.path, obj.name);
    if (obj.isDir && isWithin(obj.path, dst)) throw new VfsError('INVALID', 'the destination folder is a subfolder of the source folder');
    const src = await this.get(obj.path, args);
    if (await this.tryStat(dst, args.signal)) throw new VfsError('EXISTS', `file [${obj.name}] exists`, { path: dst });
    try {
      await this.copyTree(src, dstDir, args.signal);
    } catch (e) {
      // The folder was not there before: what a failed copy made of it is a partial copy under the
      // final name (a retry then failed with EXISTS). Best effort; the copy's error is the answer.
      const made = src.isDir ? await this.tryStat(dst).catch(() => undefined) : undefined;
      if (made) await this.remove(this.obj(dst, made, made.isDirectory()), {}).catch((err: unknown) => this.ctx.log.warn({ err, path: dst }, 'sftp: could not remove a partial copy'));
      throw e;
    }
    return this.get(dst, args);
  }

  private async copyTree(src: Obj, dstDir: Obj, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw abortError(signal);
    if (!src.isDir) {
      const link = (await this.link(src, { signal })) as Extract<Link, { kind: 'range' }>;
      await this.put(dstDir, await link.open(undefined, signal), { name: src.name, size: link.size, modified: src.modified, signal });
      return;
    }
    const made = await this.mkdir(dstDir, src.name, { signal });
    // READDIR itself, not list(): list follows links, so a link to a folder outside the root was
    // copied as that folder's content, and a link to its own folder looped until ELOOP.
    const remote = this.remote(src.path);
    const entries = await this.read(src.path, (s) => readdirAll(s, remote), signal);
    for (const { filename, attrs } of entries.sort((a, b) => Buffer.compare(Buffer.from(a.filename), Buffer.from(b.filename)))) {
      if (filename === '.' || filename === '..' || isTempName(filename)) continue;
      const child = join(src.path, filename);
      if (attrs.isSymbolicLink()) await this.copyLink(child, join(made.path, filename), signal);
      else await this.copyTree(this.obj(child, attrs, attrs.isDirectory()), made, signal);
    }
  }

  /**
   * A link inside a copied folder is copied as the link itself, its target text unchanged (as the
   * Local driver's cp with verbatimSymlinks). A server that refuses to make it: skipped, and logged.
   */
  private async copyLink(from: string, to: string, signal?: AbortSignal): Promise<void> {
    await this.write(to, async (s) => {
      try {
        const target = await call<string>(s, (cb) => s.readlink(this.remote(from), cb));
        await call(s, (cb) => s.symlink(target, this.remote(to), cb));
      } catch (e) {
        if (sftpStatus(e) === undefined) throw e; // not the server's answer: the connection failed
        this.ctx.log.warn({ err: e, path: from }, 'sftp: a symlink in a copied folder was not copied (the server refused it)');
      }
    }, signal);
  }

  async remove(obj: Obj, args: RemoveArgs): Promise<void> {
    const st = await this.read(obj.path, (s) => call<Stats>(s, (cb) => s.lstat(this.remote(obj.path), cb)), args.signal);
    const remote = this.remote(obj.path);
    if (!st.isDirectory()) {
      await this.write(obj.path, (s) => call(s, (cb) => s.unlink(remote, cb)), args.signal);
      return;
    }
    // READDIR itself, not list(): list leaves out upload temp files and fails on (or skips) broken
    // symlinks, and any of those left in the folder made its rmdir fail.
    const entries = await this.read(obj.path, (s) => readdirAll(s, remote), args.signal);
    const children = entries.filter((e) => e.filename !== '.' && e.filename !== '..');
    // onlyEmpty: READDIR shows every entry; the server's rmdir refuses a folder filled meanwhile.
    if (args.onlyEmpty && children.length) throw new VfsError('NOT_EMPTY', undefined, { path: obj.path });
    for (const { filename, attrs } of children) await this.remove(this.obj(join(obj.path, filename), attrs, attrs.isDirectory()), args);
    await this.write(obj.path, (s) => call(s, (cb) => s.rmdir(remote, cb)), args.signal);
  }

  async usage(args: CallArgs): Promise<{ total: number; free: number; used: number }> {
    type Vfs = { f_frsize: number; f_blocks: number; f_bfree: number; f_bavail: number };
    const v = await this.read('/', (s) => call<Vfs>(s, (cb) => s.ext_openssh_statvfs(this.root, cb as never)), args.signal);
    return { total: v.f_blocks * v.f_frsize, free: v.f_bavail * v.f_frsize, used: (v.f_blocks - v.f_bfree) * v.f_frsize };
  }
}
