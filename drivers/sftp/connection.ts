/**
 * One SSH connection and SFTP channel per storage, shared by every call. A dropped connection is
 * forgotten and the next call dials again; calls that fail because the connection died (not because
 * the server answered with an SFTP status) are retried once on a fresh connection.
 */
import { Client, type ConnectConfig, type SFTPWrapper } from 'ssh2';
import type { Logger } from 'pino';
import { VfsError } from '../../src/errors.js';

export interface SshParams {
  host: string;
  port: number;
  username: string;
  password?: string;
  privateKey?: string;
  passphrase?: string;
}

/** SFTP v3 status codes that say something about the path. */
const NO_SUCH_FILE = 2;
const PERMISSION_DENIED = 3;

export function parseAddress(address: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(address) ?? /^([^:]+)(?::(\d+))?$/.exec(address);
  if (!m) throw new VfsError('INVALID', `bad address ${JSON.stringify(address)}: want host or host:port`);
  return { host: m[1]!, port: m[2] ? Number(m[2]) : 22 };
}

/** An SFTP status error (the server answered) as opposed to a transport failure. */
export function sftpStatus(e: unknown): number | undefined {
  const code = (e as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' ? code : undefined;
}

export function sftpError(e: unknown, path?: string): VfsError {
  if (e instanceof VfsError) return e;
  const status = sftpStatus(e);
  if (status === NO_SUCH_FILE) return new VfsError('NOT_FOUND', undefined, { path, cause: e });
  if (status === PERMISSION_DENIED) return new VfsError('FORBIDDEN', undefined, { path, cause: e });
  return new VfsError('UPSTREAM', `sftp: ${(e as Error)?.message ?? 'failure'}`, { path, cause: e });
}

interface Live {
  client: Client;
  sftp: SFTPWrapper;
}

function connectError(e: unknown, p: SshParams): VfsError {
  const err = e as Error & { level?: string; code?: string };
  const where = `${p.host}:${p.port}`;
  if (err.level === 'client-authentication') return new VfsError('UPSTREAM', `sftp: authentication failed for user ${p.username} at ${where}`, { cause: e });
  if (err.level === 'client-timeout') return new VfsError('UPSTREAM', `sftp: timed out connecting to ${where}`, { cause: e });
  if (err.code) return new VfsError('UPSTREAM', `sftp: cannot connect to ${where}: ${err.code}`, { cause: e });
  return new VfsError('UPSTREAM', `sftp: ${err.message}`, { cause: e });
}

export class SftpConnection {
  private live?: Promise<Live>;
  private closed = false;

  constructor(private readonly params: SshParams, private readonly log: Logger) {}

  private dial(signal?: AbortSignal): Promise<Live> {
    const p = this.params;
    return new Promise<Live>((resolve, reject) => {
      const client = new Client();
      let done = false;
      const fail = (e: unknown) => {
        if (done) return;
        done = true;
        signal?.removeEventListener('abort', onAbort);
        client.end();
        reject(e instanceof VfsError ? e : connectError(e, p));
      };
      const onAbort = () => fail(new VfsError('UPSTREAM', `sftp: connecting to ${p.host}:${p.port} was aborted`, { cause: signal?.reason }));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      client.on('error', (e) => {
        if (!done) fail(e);
        else this.log.warn({ err: e }, 'sftp connection error');
      });
      client.on('ready', () => {
        client.sftp((err, sftp) => {
          if (err) return fail(err);
          // Pending requests fail through their callbacks; without a listener the channel's own
          // error event on a dropped connection would crash the process.
          sftp.on('error', (e: Error) => this.log.debug({ err: e }, 'sftp channel error'));
          done = true;
          signal?.removeEventListener('abort', onAbort);
          resolve({ client, sftp });
        });
      });
      const cfg: ConnectConfig = {
        host: p.host, port: p.port, username: p.username,
        password: p.password || undefined, privateKey: p.privateKey || undefined, passphrase: p.passphrase || undefined,
        readyTimeout: 10_000, keepaliveInterval: 15_000, keepaliveCountMax: 3,
        // Like AList, any host key is accepted (there is no option to pin one); log it for audit.
        hostHash: 'sha256',
        hostVerifier: (fingerprint: string) => { this.log.debug({ fingerprint }, 'sftp host key'); return true; },
      };
      try {
        client.connect(cfg);
      } catch (e) {
        fail(new VfsError('INVALID', `sftp: ${(e as Error).message}`, { cause: e })); // e.g. an unparsable private_key
      }
    });
  }

  /** The shared channel, dialling when there is none. */
  get(signal?: AbortSignal): Promise<Live> {
    if (this.closed) return Promise.reject(new VfsError('STORAGE_UNAVAILABLE', 'sftp storage dropped'));
    if (!this.live) {
      const attempt = this.dial(signal);
      this.live = attempt;
      attempt.then(({ client }) => {
        const forget = () => { if (this.live === attempt) this.live = undefined; };
        client.on('close', forget);
        client.on('end', forget);
      }, () => { if (this.live === attempt) this.live = undefined; });
    }
    return this.live;
  }

  /**
   * Run one call on the channel. A transport failure (no SFTP status) forgets the connection; an
   * idempotent call is then retried once on a new one. Writes are not retried: the first attempt
   * may have reached the server.
   */
  async run<T>(fn: (sftp: SFTPWrapper) => Promise<T>, opts: { signal?: AbortSignal; path?: string; idempotent?: boolean } = {}): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const pending = this.get(opts.signal);
      const live = await pending;
      try {
        return await fn(live.sftp);
      } catch (e) {
        if (e instanceof VfsError || sftpStatus(e) !== undefined) throw sftpError(e, opts.path);
        this.log.info({ err: e }, 'sftp connection lost');
        live.client.end();
        if (this.live === pending) this.live = undefined;
        if (!opts.idempotent || attempt > 0 || opts.signal?.aborted) throw sftpError(e, opts.path);
      }
    }
  }

  async end(): Promise<void> {
    this.closed = true;
    const live = this.live;
    this.live = undefined;
    if (live) (await live.catch(() => undefined))?.client.end();
  }
}

/** Promisify one callback-style SFTP call. */
export function call<T = void>(fn: (cb: (err: Error | null | undefined, v: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => fn((err, v) => (err ? reject(err) : resolve(v))));
}
