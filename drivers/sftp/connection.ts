/**
 * One SSH connection and SFTP channel per storage, shared by every call. A dropped connection is
 * forgotten and the next call dials again; calls that fail because the connection died (not because
 * the server answered with an SFTP status) are retried once on a fresh connection.
 *
 * The SFTP channel can die while the SSH connection lives on (the server's sftp process killed):
 * ssh2 then silently buffers every later request forever. So the channel's end/close/error, like
 * the connection's, marks the pair dead: pending calls fail, the next call dials again. Every
 * request made through `call` also has a deadline; an unanswered one drops the connection.
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

/** How long one SFTP request may go unanswered (the WebDAV driver's idle timeout). */
export const REQUEST_TIMEOUT_MS = 60_000;

/** One SSH connection with its SFTP channel, and whether it still works. */
class Live {
  /** Why it stopped working; set once. */
  dead?: Error;
  private readonly onDeath = new Set<(e: Error) => void>();

  constructor(readonly client: Client, readonly sftp: SFTPWrapper, private readonly timeout: () => number) {}

  get timeoutMs(): number {
    return this.timeout();
  }

  /** Mark dead (first reason wins), fail every waiter and close the connection. */
  kill(reason: Error): void {
    if (this.dead) return;
    this.dead = reason;
    const waiters = [...this.onDeath];
    this.onDeath.clear();
    for (const w of waiters) w(reason);
    this.client.end();
  }

  /** Run `fn` when the pair dies (now, if it is dead); returns the unsubscribe function. */
  whenDead(fn: (e: Error) => void): () => void {
    if (this.dead) {
      fn(this.dead);
      return () => undefined;
    }
    this.onDeath.add(fn);
    return () => this.onDeath.delete(fn);
  }
}

const byChannel = new WeakMap<SFTPWrapper, Live>();

/** A transport failure: the connection or channel went away (no SFTP status). */
function lost(what: string): Error {
  return Object.assign(new Error(what), { lost: true });
}

function isTimeout(e: unknown): boolean {
  return (e as { timedOut?: unknown } | undefined)?.timedOut === true;
}

/** True when `e` says the connection (not the server's answer) failed. */
export function isConnectionLost(e: unknown): boolean {
  return (e as { lost?: unknown } | undefined)?.lost === true || isTimeout(e);
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
  /** Aborted by end(): stops a dial under way. */
  private readonly dialing = new AbortController();
  /** Temporary files an upload could not remove because its connection died: removed on the next one. */
  private readonly orphans = new Set<string>();
  /** Deadline of one SFTP request (tests shorten it). */
  requestTimeoutMs = REQUEST_TIMEOUT_MS;

  constructor(private readonly params: SshParams, private readonly log: Logger) {}

  /** Remember a remote file to remove once a new connection is up. */
  leave(remotePath: string): void {
    this.orphans.add(remotePath);
  }

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
      // Lost after the server's banner but before 'ready' (mid-handshake), ssh2 emits no error and
      // clears its readyTimeout: the dial waited forever, and every later call of the storage with it.
      client.on('close', () => fail(lost('connection closed during the handshake')));
      client.on('ready', () => {
        // ssh2 waits for the server's SFTP VERSION without a deadline: a session that never says it
        // (a forced command, a hung sftp-server) held the dial, and every call of the storage, for good.
        const silent = setTimeout(() => fail(lost(`no answer opening the SFTP channel in ${this.requestTimeoutMs / 1000} s`)), this.requestTimeoutMs);
        client.sftp((err, sftp) => {
          clearTimeout(silent);
          if (err) return fail(err);
          if (done) return void sftp.end(); // given up meanwhile (the deadline, the storage dropped)
          const live = new Live(client, sftp, () => this.requestTimeoutMs);
          byChannel.set(sftp, live);
          // The channel's error event needs a listener or it would crash the process.
          sftp.on('error', (e: Error) => {
            this.log.debug({ err: e }, 'sftp channel error');
            live.kill(lost(`channel error: ${e.message}`));
          });
          for (const ev of ['end', 'close', 'exit'] as const) sftp.on(ev, () => live.kill(lost('channel closed')));
          client.on('end', () => live.kill(lost('connection lost')));
          client.on('close', () => live.kill(lost('connection lost')));
          done = true;
          signal?.removeEventListener('abort', onAbort);
          resolve(live);
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

  /**
   * The shared channel, dialling when there is none. The dial is everyone's: it stops only when the
   * storage is dropped (or at readyTimeout), and `signal` ends just this caller's wait. Dialling with
   * the first caller's signal failed every other caller waiting for it when that one gave up.
   */
  get(signal?: AbortSignal): Promise<Live> {
    if (this.closed) return Promise.reject(new VfsError('STORAGE_UNAVAILABLE', 'sftp storage dropped'));
    if (!this.live) {
      const attempt = this.dial(this.dialing.signal);
      this.live = attempt;
      attempt.then((live) => {
        live.whenDead((e) => {
          if (this.live === attempt) this.live = undefined;
          if (!this.closed) this.log.info({ err: e }, 'sftp connection lost');
        });
        this.removeOrphans(live);
      }, () => { if (this.live === attempt) this.live = undefined; });
    }
    return signal ? this.waitFor(this.live, signal) : this.live;
  }

  private waitFor(live: Promise<Live>, signal: AbortSignal): Promise<Live> {
    const aborted = () => new VfsError('UPSTREAM', `sftp: connecting to ${this.params.host}:${this.params.port} was aborted`, { cause: signal.reason });
    if (signal.aborted) return Promise.reject(aborted());
    return new Promise<Live>((resolve, reject) => {
      const onAbort = () => reject(aborted());
      signal.addEventListener('abort', onAbort, { once: true });
      live.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  /** Best effort, in the background: temporary files left by uploads cut off with their connection. */
  private removeOrphans(live: Live): void {
    for (const path of [...this.orphans]) {
      this.orphans.delete(path);
      call(live.sftp, (cb) => live.sftp.unlink(path, cb)).catch((e) => {
        if (isConnectionLost(e)) this.orphans.add(path);
        else if (sftpStatus(e) !== NO_SUCH_FILE) this.log.warn({ err: e, path }, 'sftp: cannot remove temporary file');
      });
    }
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
        live.kill(e as Error);
        if (this.live === pending) this.live = undefined;
        // An unanswered request is not retried: the next one would likely wait as long.
        if (isTimeout(e) || !opts.idempotent || attempt > 0 || opts.signal?.aborted) throw sftpError(e, opts.path);
      }
    }
  }

  async end(): Promise<void> {
    this.closed = true;
    this.dialing.abort(); // a dial under way stops now, not at readyTimeout
    const live = this.live;
    this.live = undefined;
    if (live) (await live.catch(() => undefined))?.client.end();
  }
}

/**
 * Promisify one callback-style request on channel `s`. It fails at once when the channel is dead
 * (ssh2 would buffer it forever), when the channel dies before the answer, and after the request
 * deadline, which also drops the connection.
 */
export function call<T = void>(s: SFTPWrapper, fn: (cb: (err: Error | null | undefined, v: T) => void) => void): Promise<T> {
  const live = byChannel.get(s);
  return new Promise<T>((resolve, reject) => {
    if (live?.dead) return reject(live.dead);
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let off: (() => void) | undefined;
    const settle = (err: unknown, v?: T) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      off?.();
      if (err) reject(err);
      else resolve(v as T);
    };
    if (live) timer = setTimeout(() => {
      const e = Object.assign(new Error(`no answer from the server in ${live.timeoutMs / 1000} s`), { timedOut: true });
      settle(e);
      live.kill(e);
    }, live.timeoutMs);
    off = live?.whenDead((e) => settle(e));
    try {
      fn((err, v) => settle(err, v));
    } catch (e) {
      // ssh2 refused before sending anything (an extension the server does not advertise, e.g.
      // statvfs@openssh.com): the connection is fine. Taken for a lost one, it was dropped, cutting
      // every transfer in flight (a WebDAV client asking the quota did it).
      settle(new VfsError('NOT_SUPPORTED', `sftp: ${(e as Error).message}`, { cause: e }));
    }
  });
}

/** Give up channel `s`'s connection: a request on it went unanswered for `ms` (as `call` does). */
export function expire(s: SFTPWrapper, ms: number): void {
  byChannel.get(s)?.kill(Object.assign(new Error(`no answer from the server in ${ms / 1000} s`), { timedOut: true }));
}

/** Why channel `s` stopped working, if it did. */
export function deadReason(s: SFTPWrapper): Error | undefined {
  return byChannel.get(s)?.dead;
}

/** Run `fn` when channel `s` dies; returns the unsubscribe function. */
export function whenDead(s: SFTPWrapper, fn: (e: Error) => void): () => void {
  return byChannel.get(s)?.whenDead(fn) ?? (() => undefined);
}
