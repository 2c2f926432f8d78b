/**
 * A small pool of FTP control connections per storage: FTP runs one command at a time per
 * connection, so each job has a connection to itself. Uploads and downloads, which last as long as
 * their client takes, dial connections of their own outside the pool. Jobs beyond the pool size
 * wait their turn. Idle connections are reused and closed after a while; one that broke or was
 * aborted is dropped, never reused. A transport failure retries idempotent jobs once on a fresh
 * connection; a server answer (FTPError) never does. Aborting a job closes its connection, which is
 * the only reliable way to stop an FTP transfer.
 */
import { setMaxListeners } from 'node:events';
import { Client, FTPError, parseList, type FileInfo } from 'basic-ftp';
import type { Logger } from 'pino';
import { VfsError } from '../../src/errors.js';
import { abortError } from '../util/streams.js';

export interface FtpParams {
  host: string;
  port: number;
  user: string;
  password: string;
  encoding: BufferEncoding;
}

/**
 * basic-ftp's timeout for connecting and for a control or data socket gone silent. Mutable only so
 * tests can shorten it; read when a connection is dialled.
 */
export const FTP_TIMEOUTS = { idleMs: 15_000 };

export function parseAddress(address: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(address) ?? /^([^:]+)(?::(\d+))?$/.exec(address);
  if (!m) throw new VfsError('INVALID', `bad address ${JSON.stringify(address)}: want host or host:port`);
  return { host: m[1]!, port: m[2] ? Number(m[2]) : 21 };
}

/** AList's encoding names (Go's) to Node's; anything Node cannot decode is refused up front. */
export function nodeEncoding(name: string): BufferEncoding {
  const n = name.trim().toLowerCase().replace(/_/g, '-');
  const alias: Record<string, BufferEncoding> = { 'utf-8': 'utf8', utf8: 'utf8', 'iso-8859-1': 'latin1', latin1: 'latin1', ascii: 'ascii', 'us-ascii': 'ascii' };
  const enc = alias[n] ?? (Buffer.isEncoding(n) ? (n as BufferEncoding) : undefined);
  if (!enc) throw new VfsError('INVALID', `unsupported encoding ${JSON.stringify(name)}: use UTF-8 or ISO-8859-1`);
  return enc;
}

/**
 * `name` itself when the connection's encoding can carry it, else INVALID: latin1 and ascii would
 * send other bytes (`漢` and `氢` both become `"`), landing under a wrong name or over another file.
 */
export function encodableName(name: string, encoding: BufferEncoding): string {
  if (Buffer.from(name, encoding).toString(encoding) !== name) {
    throw new VfsError('INVALID', `name ${JSON.stringify(name)} cannot be written in this FTP storage's encoding (${encoding})`);
  }
  return name;
}

export function ftpError(e: unknown, path?: string): VfsError {
  if (e instanceof VfsError) return e;
  if (e instanceof FTPError) {
    if (e.code === 550) return new VfsError('NOT_FOUND', undefined, { path, cause: e });
    if (e.code === 553) return new VfsError('INVALID', `ftp: ${e.message}`, { path, cause: e });
    // 452 insufficient storage, 552 storage allocation exceeded (RFC 959)
    if (e.code === 452 || e.code === 552) return new VfsError('NO_SPACE', undefined, { path, cause: e });
    return new VfsError('UPSTREAM', `ftp: ${e.message}`, { path, cause: e });
  }
  return new VfsError('UPSTREAM', `ftp: ${(e as Error)?.message ?? 'failure'}`, { path, cause: e });
}

export interface JobOpts {
  signal?: AbortSignal;
  path?: string;
  idempotent?: boolean;
  /**
   * On a connection of its own, dialled for the job and closed after it, outside the pool (an
   * upload, as downloads): a job that lasts as long as its client takes (a slow uplink) held one of
   * the pool's few slots, and a few such uploads stalled every listing of the storage.
   */
  own?: boolean;
}

/**
 * Control connections per storage. More than one so a long upload (or a few) cannot stall browsing;
 * few, because servers often cap connections per user or address (vsftpd max_per_ip, ProFTPD
 * MaxClientsPerHost, Pure-FTPd MaxClientsPerIP) and refuse logins beyond it. AList's FTP driver has
 * no setting for this, so it is a constant.
 */
export const POOL_SIZE = 4;
/** Below the usual server idle limits (vsftpd 300 s by default), so we close first, cleanly. */
const IDLE_MS = 60_000;

export interface PoolOpts {
  size?: number;
  idleMs?: number;
}

interface Idle {
  c: Client;
  timer: NodeJS.Timeout;
}

interface Waiter {
  grant(): void;
}

export class FtpSession {
  /** Connections not running a job; the most recently used is taken first, so extras age out. */
  private readonly idle: Idle[] = [];
  private readonly waiting: Waiter[] = [];
  private free: number;
  private readonly idleMs: number;
  /** Aborted by close(): every job sees it as its own abort, so waiting, dialling and running jobs all stop. */
  private readonly life = new AbortController();
  /** Temporary files a failed upload could not remove (the server was unreachable): removed after the next login. */
  private readonly orphans = new Set<string>();

  constructor(private readonly p: FtpParams, private readonly log: Logger, pool: PoolOpts = {}) {
    this.free = pool.size ?? POOL_SIZE;
    this.idleMs = pool.idleMs ?? IDLE_MS;
    setMaxListeners(0, this.life.signal); // one listener per job in flight or waiting, by design
  }

  /** A new logged-in connection (also used on its own for downloads, outside the pool). */
  async dial(signal?: AbortSignal): Promise<Client> {
    const stop = this.stopped(signal);
    if (stop) throw stop;
    // basic-ftp refuses a command with a line break by throwing; for PASS it throws inside its
    // socket's data handler, an uncaught exception that ended the whole server (its text holding
    // the password). Neither can be sent over FTP, so neither can log in.
    if (/[\r\n]/.test(this.p.user + this.p.password)) throw new VfsError('UPSTREAM', 'ftp: the username or password holds a line break, which FTP cannot send');
    const c = new Client(FTP_TIMEOUTS.idleMs);
    c.parseList = parseListWhole;
    // RFC 959 doubles a quote in the path of a PWD reply (vsftpd does); basic-ftp kept both, so
    // removeDir's RMD of the folder it had just emptied named another one (`a""b`): refused, 403.
    c.pwd = async () => (await Client.prototype.pwd.call(c)).replace(/""/g, '"');
    c.ftp.encoding = this.p.encoding as typeof c.ftp.encoding;
    const unsubscribe = this.onStop(signal, () => c.close());
    try {
      await c.access({ host: this.p.host, port: this.p.port, user: this.p.user, password: this.p.password, secure: false });
      if (this.orphans.size) void this.removeOrphans();
      return c;
    } catch (e) {
      c.close();
      const where = `${this.p.host}:${this.p.port}`;
      if (this.life.signal.aborted) throw this.stopped(signal)!;
      if (signal?.aborted) throw new VfsError('UPSTREAM', `ftp: connecting to ${where} was aborted`, { cause: e });
      if (e instanceof FTPError && e.code === 530) throw new VfsError('UPSTREAM', `ftp: login failed for user ${this.p.user} at ${where}`, { cause: e });
      const code = (e as NodeJS.ErrnoException).code;
      throw new VfsError('UPSTREAM', `ftp: cannot connect to ${where}: ${code ?? (e as Error).message}`, { cause: e });
    } finally {
      unsubscribe();
    }
  }

  /**
   * Run one conversation on a pooled connection, alone on it. Nothing carries over between jobs
   * sharing a connection except its working directory, and every path sent is absolute.
   */
  async run<T>(fn: (c: Client) => Promise<T>, opts: JobOpts = {}): Promise<T> {
    if (!opts.own) await this.acquire(opts.signal);
    try {
      for (let attempt = 0; ; attempt++) {
        // A retry dials: the failure may have been the server dropping every idle connection too.
        const c = attempt || opts.own ? await this.dial(opts.signal) : await this.take(opts.signal);
        const unsubscribe = this.onStop(opts.signal, () => c.close()); // the only reliable way to stop a transfer
        try {
          const stop = this.stopped(opts.signal); // stopped while the connection was being taken
          if (stop) throw stop;
          return await fn(c);
        } catch (e) {
          const stop = this.stopped(opts.signal);
          if (stop) throw stop;
          if (e instanceof VfsError || e instanceof FTPError) throw ftpError(e, opts.path);
          this.log.info({ err: e }, 'ftp connection lost');
          c.close();
          if (!opts.idempotent || attempt > 0) throw ftpError(e, opts.path);
        } finally {
          unsubscribe();
          if (opts.own) c.close();
          else this.give(c);
        }
      }
    } finally {
      if (!opts.own) this.release();
    }
  }

  /** Remember a remote file to remove once the server can be reached again. */
  leave(remotePath: string): void {
    this.orphans.add(remotePath);
  }

  /** Best effort, in the background: a file that still cannot be removed waits for the next login. */
  private async removeOrphans(): Promise<void> {
    const paths = [...this.orphans];
    this.orphans.clear();
    for (const path of paths) {
      // remove(path, true) ignores the server's refusals (already gone): only a transport failure throws.
      await this.run((c) => c.remove(path, true)).catch(() => { if (!this.life.signal.aborted) this.orphans.add(path); });
    }
  }

  /** Close every connection, idle or busy; jobs waiting or running fail, and so do later ones. */
  close(): void {
    this.life.abort();
    for (const { c, timer } of this.idle.splice(0)) {
      clearTimeout(timer);
      c.close();
    }
  }

  /** Why a job must stop (its own abort, or the storage closing), or undefined while it may go on. */
  private stopped(signal?: AbortSignal): VfsError | undefined {
    if (this.life.signal.aborted) return new VfsError('UPSTREAM', 'ftp: the storage was closed');
    if (signal?.aborted) return abortError(signal);
    return undefined;
  }

  /** Call `fn` once when the job's signal aborts or the session closes; returns the unsubscribe. */
  private onStop(signal: AbortSignal | undefined, fn: () => void): () => void {
    const targets = signal ? [signal, this.life.signal] : [this.life.signal];
    for (const t of targets) t.addEventListener('abort', fn, { once: true });
    return () => { for (const t of targets) t.removeEventListener('abort', fn); };
  }

  /** Wait for one of the pool's slots (first come, first served). */
  private async acquire(signal?: AbortSignal): Promise<void> {
    const stop = this.stopped(signal);
    if (stop) throw stop;
    if (this.free > 0) return void this.free--;
    await new Promise<void>((resolve, reject) => {
      const w: Waiter = { grant: () => { unsubscribe(); resolve(); } };
      const unsubscribe = this.onStop(signal, () => {
        this.waiting.splice(this.waiting.indexOf(w), 1);
        reject(this.stopped(signal));
      });
      this.waiting.push(w);
    });
  }

  /** Hand the slot straight to the next waiting job, so a newcomer cannot overtake it. */
  private release(): void {
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.free++;
  }

  /** The most recently used idle connection still open, else a new one. */
  private async take(signal?: AbortSignal): Promise<Client> {
    for (let i = this.idle.pop(); i; i = this.idle.pop()) {
      clearTimeout(i.timer);
      if (!i.c.closed) return i.c;
    }
    return this.dial(signal);
  }

  /** Back to the idle list, unless it broke, was aborted or the session closed. */
  private give(c: Client): void {
    if (c.closed || this.life.signal.aborted) return void c.close();
    const timer = setTimeout(() => {
      this.idle.splice(this.idle.findIndex((i) => i.c === c), 1);
      c.close();
    }, this.idleMs);
    timer.unref(); // an idle connection never keeps the process alive
    this.idle.push({ c, timer });
  }
}

/**
 * basic-ftp's LIST patterns take a name as `(.*)`, and `.` in a JavaScript regexp stops at U+2028
 * and U+2029: `a\u2028b` was listed as `a`, so a file uploaded under that name was never found.
 * Those two are swapped for private-use stand-ins the listing does not hold while it is parsed.
 */
export function parseListWhole(raw: string): FileInfo[] {
  if (!/[\u2028\u2029]/.test(raw)) return parseList(raw);
  const free: string[] = [];
  for (let c = 0xe000; free.length < 2; c++) if (!raw.includes(String.fromCharCode(c))) free.push(String.fromCharCode(c));
  const [ls, ps] = free as [string, string];
  const back = (s: string) => s.split(ls).join('\u2028').split(ps).join('\u2029');
  return parseList(raw.replace(/\u2028/g, ls).replace(/\u2029/g, ps)).map((f) => {
    f.name = back(f.name);
    if (f.link) f.link = back(f.link);
    return f;
  });
}
