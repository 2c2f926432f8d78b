/**
 * A minimal HTTP client for WebDAV over node:http/https: keep-alive agents per storage, streamed
 * request bodies, TLS verified unless the storage opts out, and a redirect policy that never sends
 * the storage's credentials to another origin.
 */
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';
import { pipeline, Readable } from 'node:stream';
import { VfsError } from '../../src/errors.js';
import { bufferAtMost } from '../util/streams.js';

export interface DavResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: IncomingMessage;
}

export interface RequestOpts {
  headers?: Record<string, string>;
  body?: Readable | string;
  signal?: AbortSignal;
  /** Follow redirects (safe methods only). */
  follow?: boolean;
}

const MAX_REDIRECTS = 5;
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS', 'PROPFIND']);
/**
 * A connection that goes silent this long is given up (uploads and downloads keep it busy).
 * Mutable only so tests can shorten it; read when a request is made.
 */
export const DAV_TIMEOUTS = { idleMs: 60_000 };

export class DavHttp {
  /**
   * Keep-alive agents with no cap on sockets (as Go's transport, which AList uses): a download holds
   * its socket as long as its reader takes, so with a cap of 8 eight paused readers (video players)
   * made every later request of the storage, listings included, wait in the agent's queue for good.
   */
  private readonly httpAgent = new http.Agent({ keepAlive: true });
  private readonly httpsAgent: https.Agent;

  /** `fixed` headers go on every request (e.g. the instance id that lets treegate detect loops). */
  constructor(
    private readonly origin: string, private readonly authorization: string | undefined, insecure: boolean,
    private readonly fixed: Record<string, string> = {},
  ) {
    this.httpsAgent = new https.Agent({ keepAlive: true, rejectUnauthorized: !insecure });
  }

  async request(method: string, url: URL, opts: RequestOpts = {}): Promise<DavResponse> {
    let current = url;
    for (let hop = 0; ; hop++) {
      const res = await this.retrying(method, current, opts);
      const location = res.headers.location;
      if (!opts.follow || !location || ![301, 302, 303, 307, 308].includes(res.status)) return res;
      res.body.resume();
      if (hop >= MAX_REDIRECTS) throw new VfsError('UPSTREAM', 'webdav: too many redirects');
      current = new URL(location, current);
    }
  }

  /**
   * A kept-alive socket the server has just closed fails the next request with ECONNRESET before
   * anything was processed; safe methods with a replayable body are sent once more.
   */
  private async retrying(method: string, url: URL, opts: RequestOpts): Promise<DavResponse> {
    try {
      return await this.once(method, url, opts);
    } catch (e) {
      const code = ((e as VfsError).cause as NodeJS.ErrnoException | undefined)?.code;
      const replayable = SAFE.has(method) && !(opts.body instanceof Readable) && !opts.signal?.aborted;
      if (!replayable || (code !== 'ECONNRESET' && code !== 'EPIPE')) throw e;
      return this.once(method, url, opts, true); // on a new connection: the pool may hold more dead ones
    }
  }

  private once(method: string, url: URL, opts: RequestOpts, fresh = false): Promise<DavResponse> {
    const headers: Record<string, string> = { ...this.fixed, ...opts.headers };
    // Credentials belong to the configured origin only, whatever a redirect says.
    if (this.authorization && url.origin === this.origin) headers.authorization = this.authorization;
    if (typeof opts.body === 'string') headers['content-length'] = String(Buffer.byteLength(opts.body));
    const mod = url.protocol === 'https:' ? https : http;
    return new Promise<DavResponse>((resolve, reject) => {
      let settled = false;
      let body: IncomingMessage | undefined;
      const fail = (e: unknown) => {
        if (settled) return;
        settled = true;
        req.destroy();
        reject(e instanceof VfsError ? e : new VfsError('UPSTREAM', `webdav: ${method} failed: ${(e as NodeJS.ErrnoException)?.code ?? (e as Error)?.message}`, { cause: e }));
      };
      const req = mod.request(url, {
        method, headers, signal: opts.signal, timeout: DAV_TIMEOUTS.idleMs,
        agent: fresh ? false : url.protocol === 'https:' ? this.httpsAgent : this.httpAgent,
        rejectUnauthorized: this.httpsAgent.options.rejectUnauthorized,
      }, (res) => {
        if (settled) return void res.resume();
        settled = true;
        body = res;
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res });
      });
      req.on('timeout', () => {
        // The socket is quiet because our reader holds the body back (a paused video player), not
        // because the server went silent: look again later instead of cutting the download.
        if (body && body.readableLength > 0) return void req.setTimeout(DAV_TIMEOUTS.idleMs);
        // Likewise an upload whose own client is quiet (a slow uplink): the body is not all given yet
        // and the server has taken every byte we had. treegate's own idle limit cuts that client.
        if (!body && opts.body instanceof Readable && !req.writableEnded && req.writableLength === 0) return void req.setTimeout(DAV_TIMEOUTS.idleMs);
        const e = new VfsError('UPSTREAM', `webdav: ${method} timed out`);
        // The answer has begun and its body went silent (a download, a listing): fail the body,
        // or its reader would wait forever on a socket that stays open.
        if (body) body.destroy(e);
        else fail(e);
      });
      req.on('error', (e) => fail(opts.signal?.aborted ? new VfsError('UPSTREAM', 'operation aborted', { cause: e }) : e));
      if (opts.body instanceof Readable) pipeline(opts.body, req, (e) => { if (e) fail(e); });
      else req.end(opts.body);
    });
  }

  destroy(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

/** The whole body as text, bounded (a listing is never this large; a hostile server could be). */
export async function text(res: DavResponse, limit = 64 * 1024 * 1024): Promise<string> {
  return (await bufferAtMost(res.body, limit, 'webdav: response')).toString('utf8');
}

export function basicAuth(username: string, password: string): string | undefined {
  if (!username && !password) return undefined;
  return 'Basic ' + Buffer.from(`${username}:${password}`).toString('base64');
}
