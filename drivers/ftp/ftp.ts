import { posix } from 'node:path';
import { PassThrough, pipeline, Readable, Writable } from 'node:stream';
import { FileType, FTPError, type Client, type FileInfo } from 'basic-ftp';
import { VfsError } from '../../src/errors.js';
import { basename, isWithin, join, segments } from '../../src/paths.js';
import type { ByteRange, CallArgs, Driver, DriverContext, Link, Obj, PutArgs, RemoveArgs } from '../types.js';
import { abortError, counter, creatableName, destroyOnAbort, isTempName, tempName } from '../util/streams.js';
import type { FtpOptions } from './index.js';
import { parseListDate } from './list-date.js';
import { loopCheck } from '../util/loops.js';
import { encodableName, ftpError, FtpSession, nodeEncoding, parseAddress } from './session.js';

const pad = (n: number, w = 2) => String(n).padStart(w, '0');
const ftpTime = (d: Date) => `${d.getUTCFullYear()}${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())}${pad(d.getUTCHours())}${pad(d.getUTCMinutes())}${pad(d.getUTCSeconds())}`;

/**
 * True when the server accepts CWD into the path (it is a folder). This leaves the pooled connection
 * in that folder; harmless, as every path this driver sends is absolute.
 */
async function isDir(c: Client, remote: string): Promise<boolean> {
  try {
    await c.cd(remote);
    return true;
  } catch (e) {
    if (e instanceof FTPError) return false;
    throw e;
  }
}

/**
 * The entries of folder `remote`, or undefined when it cannot be entered (missing, a file, or
 * refused). CWD, then LIST of the working folder: vsftpd reads a LIST argument it cannot open as a
 * folder as "folder/pattern" (wildcards too), so LIST of `/a.txt` listed a.txt itself, a lookup of
 * `/a.txt/a.txt` (or of a.txt under a missing folder `a*`) found a file, and a folder it may not
 * open listed itself.
 */
async function listDir(c: Client, remote: string): Promise<FileInfo[] | undefined> {
  if (!(await isDir(c, remote))) return undefined;
  return (await c.list()).filter((f) => f.name !== '.' && f.name !== '..');
}

async function fileSize(c: Client, remote: string): Promise<number | undefined> {
  try {
    return await c.size(remote);
  } catch (e) {
    if (e instanceof FTPError) return undefined;
    throw e;
  }
}

/**
 * Run `op`; a 550 answer ("not taken") is a refusal, not a missing object, when `there` still finds
 * what the command acted on: a DELE refused in a read-only folder was NOT_FOUND, which REST's
 * remove takes for "already gone" and answered success while the file stayed.
 */
async function refusable<T>(op: () => Promise<T>, there: () => Promise<boolean>, path: string): Promise<T> {
  try {
    return await op();
  } catch (e) {
    // 553 too: vsftpd refuses a STOR in a folder it may not write to with "553 Could not create
    // file.", which became INVALID (400, "Bad Request" to WebDAV clients) for a valid name.
    if (e instanceof FTPError && (e.code === 550 || e.code === 553)) {
      const found = await there().catch(() => undefined);
      if (found) throw new VfsError('FORBIDDEN', `ftp: the server refused it: ${e.message}`, { path, cause: e });
      // vsftpd answers a STOR into a folder that is not there with 553 too: that was INVALID, not NOT_FOUND.
      if (found === false && e.code === 553) throw new VfsError('NOT_FOUND', undefined, { path, cause: e });
    }
    throw e;
  }
}

/**
 * `src` as the body of an upload on `c`. basic-ftp's idle timeout on the data socket (15 s) cut the
 * upload of a client that paused that long (a slow uplink): it is off while we wait for our own
 * client's next bytes, and on, for the server, whenever there are bytes to send or the body has ended.
 * treegate's own idle limit cuts a client that stays quiet.
 */
function patientBody(c: Client, src: Readable): Readable {
  const it = src[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  async function* feed(): AsyncGenerator<Buffer> {
    try {
      for (;;) {
        c.ftp.dataSocket?.setTimeout(0);
        const r = await it.next();
        c.ftp.dataSocket?.setTimeout(c.ftp.timeout);
        if (r.done) return;
        yield r.value;
      }
    } finally {
      await it.return?.();
    }
  }
  // One chunk of read-ahead: the generator waits at `yield` (timeout on) while the server is slow.
  return Readable.from(feed(), { objectMode: false, highWaterMark: 1 });
}

export class FtpDriver implements Driver {
  private readonly session: FtpSession;
  private readonly root: string;
  private readonly encoding: BufferEncoding;

  constructor(opts: FtpOptions, private readonly ctx: DriverContext) {
    const { host, port } = parseAddress(opts.address);
    this.encoding = nodeEncoding(opts.encoding);
    this.session = new FtpSession({ host, port, user: opts.username, password: opts.password, encoding: this.encoding }, ctx.log);
    this.root = posix.normalize('/' + (opts.root_folder_path || '/'));
  }

  /** A new entry's name: valid, and representable in the configured encoding (else INVALID). */
  private newName(name: string): string {
    // FTP commands are lines: basic-ftp refuses a path with CR or LF, which failed as a lost
    // connection (UPSTREAM, 500) instead of a name the storage cannot hold.
    if (/[\r\n]/.test(name)) throw new VfsError('INVALID', `name ${JSON.stringify(name)} cannot be sent over FTP (line break)`);
    return encodableName(creatableName(name), this.encoding);
  }

  private remote(path: string): string {
    // basic-ftp refuses a command with CR or LF (no injection), but as a lost connection: a
    // lookup under a folder name with a line break was UPSTREAM (WebDAV 502) after a retry on a new
    // connection. No such path can be reached over FTP: it is not found. (New names: newName.)
    if (/[\r\n]/.test(path)) throw new VfsError('NOT_FOUND', undefined, { path });
    return posix.join(this.root, ...segments(path));
  }

  private obj(path: string, f: FileInfo): Obj {
    const dir = f.type === FileType.Directory;
    const modified = f.modifiedAt ?? parseListDate(f.rawModifiedAt, new Date()) ?? new Date(0);
    return { name: f.name, path, size: dir ? 0 : f.size, isDir: dir, modified };
  }

  /**
   * `obj`, with a symlink taken as what it points to: the listing gives the link itself, so a link
   * to a folder was a file that could not be opened and a link to a file had the size of its target
   * text. A broken link stays as listed. This leaves `c` in another working folder.
   */
  private async entry(c: Client, path: string, f: FileInfo): Promise<Obj> {
    const o = this.obj(path, f);
    if (f.type !== FileType.SymbolicLink) return o;
    const target = this.remote(path);
    if (await isDir(c, target)) return { ...o, size: 0, isDir: true };
    const size = await fileSize(c, target);
    return size === undefined ? o : { ...o, size };
  }

  async init(signal: AbortSignal): Promise<void> {
    const ok = await this.session.run((c) => isDir(c, this.root), { signal, idempotent: true });
    if (!ok) throw new VfsError('UPSTREAM', `root folder ${this.root} not exists`);
  }

  async drop(): Promise<void> {
    this.session.close();
  }

  async list(dir: Obj, args: CallArgs): Promise<Obj[]> {
    if (!dir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
    const remote = this.remote(dir.path);
    return this.session.run(async (c) => {
      const all = await listDir(c, remote);
      if (!all) {
        if ((await fileSize(c, remote)) !== undefined) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
        // A folder its parent lists that cannot be entered is refused to this account, not missing.
        const s = segments(dir.path);
        const listed = s.length && (await listDir(c, this.remote('/' + s.slice(0, -1).join('/'))))?.some((f) => f.name === s.at(-1));
        throw new VfsError(listed ? 'FORBIDDEN' : 'NOT_FOUND', undefined, { path: dir.path });
      }
      const out: Obj[] = [];
      // The real path of a folder: the working folder the server reports once in it (vsftpd: getcwd).
      const loops = loopCheck(remote, this.root, async (p) => (await c.cd(p), c.pwd()));
      for (const f of all) {
        if (isTempName(f.name)) continue;
        const o = await this.entry(c, join(dir.path, f.name), f);
        // A link to this folder or one above it is left out: walks of the tree followed it without
        // end. entry() left `c` in the link's folder: its PWD is where the link leads.
        if (f.type === FileType.SymbolicLink && o.isDir && (await loops(await c.pwd()))) continue;
        out.push(o);
      }
      return out;
    }, { signal: args.signal, path: dir.path, idempotent: true });
  }

  async get(path: string, args: CallArgs): Promise<Obj> {
    const s = segments(path);
    if (!s.length) return { name: '', path: '/', size: 0, isDir: true, modified: new Date(0) };
    const p = '/' + s.join('/');
    const parent = this.remote('/' + s.slice(0, -1).join('/'));
    return this.session.run(async (c) => {
      const hit = (await listDir(c, parent))?.find((f) => f.name === s.at(-1));
      if (!hit) throw new VfsError('NOT_FOUND', undefined, { path: p });
      const o = await this.entry(c, p, hit);
      if (o.isDir) return o;
      // LIST times have minute or day precision; MDTM has seconds.
      const exact = await c.lastMod(this.remote(p)).catch(() => undefined);
      return exact ? { ...o, modified: exact } : o;
    }, { signal: args.signal, path: p, idempotent: true });
  }

  async link(file: Obj, args: CallArgs): Promise<Link> {
    if (file.isDir) throw new VfsError('IS_A_DIR', undefined, { path: file.path });
    const remote = this.remote(file.path);
    const size = await this.session.run((c) => fileSize(c, remote), { signal: args.signal, path: file.path, idempotent: true });
    if (size === undefined) throw new VfsError('NOT_FOUND', undefined, { path: file.path });
    return { kind: 'range', size, open: (range, signal) => this.download(remote, range, signal) };
  }

  /**
   * A download on its own connection, outside the session's pool: stopping early just closes that
   * connection, and a reader that takes hours does not hold one of the pool's few slots.
   */
  private async download(remote: string, range: ByteRange | undefined, signal?: AbortSignal): Promise<Readable> {
    const c = await this.session.dial(signal);
    const start = range?.start ?? 0;
    const want = range?.end !== undefined ? range.end - start + 1 : Infinity;
    const out = new PassThrough();
    let got = 0;
    let done = false;
    const finish = () => { done = true; c.close(); };
    // The stream is handed out once the server has answered RETR (first bytes, or the end of an
    // empty file), as SFTP and WebDAV open first: a refused RETR (a file the account may not read)
    // failed inside a stream already answered 200, and the client saw a cut connection.
    let begun = false;
    let begin!: () => void;
    let fail!: (e: unknown) => void;
    const answered = new Promise<void>((resolve, reject) => { begin = () => { begun = true; resolve(); }; fail = reject; });
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        begin();
        if (done) return cb();
        const take = chunk.subarray(0, Math.min(chunk.length, want - got));
        got += take.length;
        if (got >= want) {
          out.end(take);
          finish();
          return cb();
        }
        if (out.write(take)) return cb();
        // Waiting on our reader, not on the server: basic-ftp's idle timeout on the data socket
        // (15 s) cut the download of a reader that paused that long (a paused video player).
        const data = c.ftp.dataSocket;
        data?.setTimeout(0);
        out.once('drain', () => { data?.setTimeout(c.ftp.timeout); cb(); });
      },
    });
    c.downloadTo(sink, remote, start).then(() => { begin(); if (!done) out.end(); finish(); }, (e) => {
      if (begun && !done) out.destroy(ftpError(e, remote));
      else if (!begun) fail(signal?.aborted ? abortError(signal) : e);
      finish();
    });
    const stop = () => c.close();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      await answered;
    } catch (e) {
      // 550 for a file SIZE has just found: refused to this account, not missing.
      if (e instanceof FTPError && e.code === 550 && (await this.session.run((p) => fileSize(p, remote), { idempotent: true }).catch(() => undefined)) !== undefined) {
        throw new VfsError('FORBIDDEN', `ftp: the server refused it: ${e.message}`, { path: remote, cause: e });
      }
      throw ftpError(e, remote);
    } finally {
      signal?.removeEventListener('abort', stop);
    }
    out.on('close', () => { if (!done) finish(); }); // the reader went away
    destroyOnAbort(out, signal);
    return out;
  }

  private async setTime(c: Client, remote: string, when: Date): Promise<void> {
    // MFMT is the standard; vsftpd only knows the older "MDTM <time> <path>" form.
    try {
      await c.send(`MFMT ${ftpTime(when)} ${remote}`);
    } catch (e) {
      if (!(e instanceof FTPError)) throw e;
      await c.send(`MDTM ${ftpTime(when)} ${remote}`);
    }
  }

  async setModified(obj: Obj, modified: Date, args: CallArgs): Promise<void> {
    const remote = this.remote(obj.path);
    // A refused MDTM is 550 too: without the look, SFTP's SETSTAT answered "No such file" for a file that is there.
    const there = async (c: Client) => (await isDir(c, remote)) || (await fileSize(c, remote)) !== undefined;
    await this.session.run((c) => refusable(() => this.setTime(c, remote, modified), () => there(c), obj.path), { signal: args.signal, path: obj.path });
  }

  async mkdir(parent: Obj, name: string, args: CallArgs): Promise<Obj> {
    if (!parent.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: parent.path });
    const path = join(parent.path, this.newName(name));
    const remote = this.remote(path);
    await this.session.run(async (c) => {
      if ((await isDir(c, remote)) || (await fileSize(c, remote)) !== undefined) throw new VfsError('EXISTS', undefined, { path });
      await refusable(() => c.send(`MKD ${remote}`), () => isDir(c, this.remote(parent.path)), path);
    }, { signal: args.signal, path: parent.path });
    return { name, path, size: 0, isDir: true, modified: new Date() };
  }

  async put(dstDir: Obj, stream: Readable, args: PutArgs): Promise<Obj> {
    if (!dstDir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dstDir.path });
    const path = join(dstDir.path, this.newName(args.name));
    const remote = this.remote(path);
    const tmp = this.remote(join(dstDir.path, tempName(args.name)));
    const count = counter(args.size, args.onProgress);
    let kept: Date | undefined;
    try {
      await this.session.run(async (c) => {
        if (await isDir(c, remote)) throw new VfsError('IS_A_DIR', undefined, { path });
        try {
          pipeline(stream, count, () => undefined); // a source error destroys `count`, failing the upload
          await refusable(() => c.uploadFrom(patientBody(c, count), tmp), () => isDir(c, this.remote(dstDir.path)), path);
          if (count.errored) throw count.errored;
          // RNTO replaces an existing file on common servers: with noReplace, look just before it.
          if (args.noReplace && ((await fileSize(c, remote)) !== undefined || (await isDir(c, remote)))) {
            throw new VfsError('EXISTS', 'file exists', { path });
          }
          await c.rename(tmp, remote);
        } catch (e) {
          c.close(); // a broken transfer leaves the control connection out of step: start clean
          stream.destroy();
          throw e;
        }
        // A server without MFMT keeps the upload time: the object returned says so (WebDAV's
        // X-OC-MTime: accepted is sent only when the mtime was kept). What the server kept is read
        // back: vsftpd takes a time before 1901-12-13 and stores that date (its 32-bit time_t
        // floor), and the time asked for was reported as kept.
        if (args.modified) await this.setTime(c, remote, args.modified).catch(() => undefined);
        // Read back in every case: our clock's time of the upload gave WebDAV's PUT an ETag the
        // file never had (MDTM's), and the client's next If-Match with it failed 412.
        kept = await c.lastMod(remote).catch(() => undefined);
      }, { signal: args.signal, path, own: true });
    } catch (e) {
      if (!(e instanceof VfsError && e.code === 'IS_A_DIR')) await this.discard(tmp);
      throw count.errored instanceof VfsError ? count.errored : e;
    }
    return { name: args.name, path, size: count.bytes, isDir: false, modified: kept ?? new Date() };
  }

  /**
   * Remove a failed upload's temp file; the server may still be closing it, so look again (bounded).
   * A server that cannot be reached (the reason the upload failed, often) gets it removed after the
   * next login instead: it would otherwise stay, visible in listings, for good.
   */
  private async discard(tmp: string): Promise<void> {
    for (let i = 0; i < 5; i++) {
      const left = await this.session.run(async (c) => {
        await c.remove(tmp, true);
        await new Promise((r) => setTimeout(r, 50 * (i + 1)));
        return (await fileSize(c, tmp)) !== undefined;
      }, { idempotent: true }).catch(() => undefined); // both calls swallow the server's refusals: this is a transport failure
      if (left === undefined) return void this.session.leave(tmp);
      if (!left) return;
    }
    this.ctx.log.warn({ path: tmp }, 'ftp: could not remove a failed upload\'s temp file');
  }

  private async moveTo(obj: Obj, dst: string, signal?: AbortSignal): Promise<Obj> {
    if (obj.isDir && isWithin(obj.path, dst)) throw new VfsError('INVALID', 'the destination folder is a subfolder of the source folder');
    const to = this.remote(dst);
    await this.session.run(async (c) => {
      if ((await isDir(c, to)) || (await fileSize(c, to)) !== undefined) throw new VfsError('EXISTS', `file [${basename(dst)}] exists`, { path: dst });
      const from = this.remote(obj.path);
      await refusable(() => c.rename(from, to), async () => (await isDir(c, from)) || (await fileSize(c, from)) !== undefined, obj.path).catch(async (e: unknown) => {
        // vsftpd refuses an RNTO into a folder that is not there like a permission: that was FORBIDDEN.
        const dstDir = '/' + segments(dst).slice(0, -1).join('/');
        if (e instanceof VfsError && e.code === 'FORBIDDEN' && !(await isDir(c, this.remote(dstDir)).catch(() => true))) throw new VfsError('NOT_FOUND', undefined, { path: dstDir, cause: e });
        throw e;
      });
    }, { signal, path: obj.path });
    return { ...obj, name: basename(dst), path: dst };
  }

  async rename(obj: Obj, newName: string, args: CallArgs): Promise<Obj> {
    return this.moveTo(obj, join(segments(obj.path).slice(0, -1).join('/'), this.newName(newName)), args.signal);
  }

  async move(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj> {
    if (!dstDir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dstDir.path });
    return this.moveTo(obj, join(dstDir.path, this.newName(obj.name)), args.signal);
  }

  async remove(obj: Obj, args: RemoveArgs): Promise<void> {
    const remote = this.remote(obj.path);
    await this.session.run(async (c) => {
      if (!obj.isDir) return void (await refusable(() => c.remove(remote), async () => (await fileSize(c, remote)) !== undefined, obj.path));
      if (!(await isDir(c, remote))) throw new VfsError('NOT_FOUND', undefined, { path: obj.path });
      // A link to a folder is listed as a folder: removing it removes the link (DELE), never what the
      // folder it points to holds (removeDir enters the link and empties the target).
      const s = segments(obj.path);
      const listed = (await listDir(c, this.remote('/' + s.slice(0, -1).join('/'))))?.find((f) => f.name === s.at(-1));
      if (listed?.type === FileType.SymbolicLink) return void (await refusable(() => c.remove(remote), () => isDir(c, remote), obj.path));
      if (args.onlyEmpty) {
        // LIST may skip dotfiles; RMD itself refuses a folder with anything in it (550 here: the
        // folder was just found, so that is what it means).
        const notEmpty = new VfsError('NOT_EMPTY', undefined, { path: obj.path });
        if ((await c.list(remote)).some((f) => f.name !== '.' && f.name !== '..')) throw notEmpty;
        return void (await c.removeEmptyDir(remote).catch((e: unknown) => {
          throw e instanceof FTPError && e.code === 550 ? notEmpty : e;
        }));
      }
      await refusable(() => c.removeDir(remote), () => isDir(c, remote), obj.path);
    }, { signal: args.signal, path: obj.path });
  }
}
