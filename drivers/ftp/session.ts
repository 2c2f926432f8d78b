/**
 * One FTP control connection per storage with a queue in front of it (FTP is one command at a
 * time), re-dialled on the next job after it drops. A transport failure retries idempotent jobs
 * once; a server answer (FTPError) never does. Aborting a job closes the connection, which is the
 * only reliable way to stop an FTP transfer; the next job dials again.
 */
import { Client, FTPError } from 'basic-ftp';
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

const CONNECT_TIMEOUT_MS = 15_000;

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
    return new VfsError('UPSTREAM', `ftp: ${e.message}`, { path, cause: e });
  }
  return new VfsError('UPSTREAM', `ftp: ${(e as Error)?.message ?? 'failure'}`, { path, cause: e });
}

export interface JobOpts {
  signal?: AbortSignal;
  path?: string;
  idempotent?: boolean;
}

export class FtpSession {
  private client?: Client;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly p: FtpParams, private readonly log: Logger) {}

  /** A new logged-in connection (also used on its own for downloads). */
  async dial(signal?: AbortSignal): Promise<Client> {
    if (signal?.aborted) throw abortError(signal);
    const c = new Client(CONNECT_TIMEOUT_MS);
    c.ftp.encoding = this.p.encoding as typeof c.ftp.encoding;
    const onAbort = () => c.close();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await c.access({ host: this.p.host, port: this.p.port, user: this.p.user, password: this.p.password, secure: false });
      return c;
    } catch (e) {
      c.close();
      const where = `${this.p.host}:${this.p.port}`;
      if (signal?.aborted) throw new VfsError('UPSTREAM', `ftp: connecting to ${where} was aborted`, { cause: e });
      if (e instanceof FTPError && e.code === 530) throw new VfsError('UPSTREAM', `ftp: login failed for user ${this.p.user} at ${where}`, { cause: e });
      const code = (e as NodeJS.ErrnoException).code;
      throw new VfsError('UPSTREAM', `ftp: cannot connect to ${where}: ${code ?? (e as Error).message}`, { cause: e });
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Run one conversation on the shared connection, after every job queued before it. */
  run<T>(fn: (c: Client) => Promise<T>, opts: JobOpts = {}): Promise<T> {
    const job = this.queue.then(() => this.exec(fn, opts));
    this.queue = job.catch(() => undefined);
    return job;
  }

  private async exec<T>(fn: (c: Client) => Promise<T>, opts: JobOpts): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      if (opts.signal?.aborted) throw abortError(opts.signal);
      if (!this.client || this.client.closed) this.client = await this.dial(opts.signal);
      const c = this.client;
      const onAbort = () => c.close();
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      try {
        return await fn(c);
      } catch (e) {
        if (opts.signal?.aborted) throw abortError(opts.signal);
        if (e instanceof VfsError || e instanceof FTPError) throw ftpError(e, opts.path);
        this.log.info({ err: e }, 'ftp connection lost');
        c.close();
        this.client = undefined;
        if (!opts.idempotent || attempt > 0) throw ftpError(e, opts.path);
      } finally {
        opts.signal?.removeEventListener('abort', onAbort);
      }
    }
  }

  close(): void {
    this.client?.close();
    this.client = undefined;
  }
}
