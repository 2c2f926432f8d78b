/**
 * The WebDAV adapter: every request under /dav on the shared HTTP server. Authenticates with HTTP
 * Basic, builds the AccessContext `{principal, protocol: 'webdav', ip}` and dispatches to one method
 * handler; every file operation is a VFS call, and every failure becomes a status through errors.ts.
 * One log line per request (method, path, status, ms, user) — never credentials.
 */
import { getEventListeners } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import proxyaddr from '@fastify/proxy-addr';
import type { Core } from '../../src/core.js';
import { isVfsError } from '../../src/errors.js';
import { accessLogger } from '../../src/log.js';
import { INSTANCE_HEADER } from '../../drivers/types.js';
import { authenticate, ConnectionCredentials } from './auth.js';
import { DeadProps } from './dead-props.js';
import { DavError, statusOf } from './errors.js';
import { followTree } from './follow-changes.js';
import { storedPath } from './unicode-names.js';
import { LockManager } from './locks.js';
import { clientIp, DAV_PREFIX, drain, sendStatus, userPathOf, type Dav, type DavDeps } from './request.js';
import { errorBody } from './xml.js';
import { copyMove } from './methods/copy-move.js';
import { get, put } from './methods/get-put.js';
import { lock, unlock } from './methods/lock.js';
import { del, mkcol } from './methods/mkcol-delete.js';
import { options, optionsAnonymous } from './methods/options.js';
import { propfind } from './methods/propfind.js';
import { proppatch } from './methods/proppatch.js';
import { basePathOf } from '../../src/site-url.js';

export { DAV_PREFIX };

export interface WebdavHandler {
  handle(req: IncomingMessage, res: ServerResponse): void;
  close(): Promise<void>;
}

const METHODS: Record<string, (dav: Dav) => Promise<void>> = {
  OPTIONS: options,
  PROPFIND: propfind,
  PROPPATCH: proppatch,
  GET: get,
  HEAD: get,
  PUT: put,
  MKCOL: mkcol,
  DELETE: del,
  COPY: copyMove,
  MOVE: copyMove,
  LOCK: lock,
  UNLOCK: unlock,
};

const KNOWN_ELSEWHERE = new Set(['POST', 'PATCH', 'TRACE', 'CONNECT', 'SEARCH', 'REPORT', 'ACL', 'BIND', 'MKCALENDAR']);

export function createWebdavHandler(core: Core): WebdavHandler {
  return refuseOwnRequests(core.instanceId, createDavHandler({
    vfs: core.vfs,
    accounts: core.accounts,
    kv: core.store.kv,
    settings: core.settings,
    log: core.log.child({ proto: 'webdav' }),
    trustProxy: core.config.trusted_proxies?.length ? proxyaddr.compile(core.config.trusted_proxies) : undefined,
    siteBase: basePathOf(core.config.site_url ?? ''),
    onChange: (listener) => core.vfs.onChange(listener),
    mountPaths: () => core.mounts.all().map((m) => m.vpath),
  }));
}

/**
 * Loop guard (added with the WebDav driver's self-mount check): a WebDav storage sends its server's
 * instance id (INSTANCE_HEADER, DriverContext.instanceId). A request carrying *our* id comes from a
 * storage of this very server mounting its own /dav, which would recurse into itself: answer 508
 * Loop Detected before anything else, and the driver turns that into a clear init error.
 */
function refuseOwnRequests(instanceId: string, inner: WebdavHandler): WebdavHandler {
  return {
    handle(req, res) {
      if (req.headers[INSTANCE_HEADER] !== instanceId) return inner.handle(req, res);
      drain(req);
      sendStatus(res, 508, {}, '508 Loop Detected');
    },
    close: () => inner.close(),
  };
}

export function createDavHandler(deps: DavDeps): WebdavHandler {
  const locks = new LockManager(deps.kv);
  const props = new DeadProps(deps.kv, deps.mountPaths);
  const follower = followTree(deps.onChange, locks, props, deps.log, deps.mountPaths);
  const inflight = new Set<Promise<void>>();
  const access = accessLogger(deps.log);
  const connections = new ConnectionCredentials();
  const signals = new ConnectionSignals();
  // Persisted locks and dead properties load once; only requests before that wait for it.
  let loaded = false;
  const load = () => Promise.all([locks.ready(), props.ready()]).then(() => void (loaded = true));

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const t0 = performance.now();
    const method = (req.method ?? 'GET').toUpperCase();
    let path = '-';
    let user = '-';
    const abort = signals.take(req.socket);
    res.once('close', () => {
      if (!res.writableFinished) abort.abort(); // the client went away: stop the VFS work
      else if (method === 'PUT') signals.passOn(req.socket, abort);
      const ms = Math.round((performance.now() - t0) * 10) / 10;
      // A request the client gave up on is logged as 499 (nginx's "client closed request"), not as the
      // 200 Node's response still holds.
      const status = res.writableFinished ? res.statusCode : 499;
      access.info(res.writableFinished ? { method, path, status, ms, user } : { method, path, status, ms, user, aborted: true }, 'webdav');
    });
    try {
      const p = userPathOf(req.url ?? '/');
      if (p === undefined) {
        if (method === 'OPTIONS' && req.url === '/') return optionsAnonymous(res); // the site root (server.ts)
        throw new DavError(404);
      }
      path = p;
      if (method === 'OPTIONS' && !req.headers.authorization) return optionsAnonymous(res);
      const ip = clientIp(req, deps.trustProxy);
      const principal = await authenticate(deps, req, ip, connections);
      user = principal.username;
      const fn = Object.hasOwn(METHODS, method) ? METHODS[method] : undefined; // the method is client input
      if (!fn) throw new DavError(KNOWN_ELSEWHERE.has(method) ? 405 : 501, `${method} is not supported`);
      if (!loaded) await load();
      if (follower.busy) await follower.settled(); // locks and properties reflect every change so far
      const ctx = { principal, protocol: 'webdav' as const, ip, signal: abort.signal };
      const asSent = path;
      path = await storedPath(deps.vfs, ctx, path); // Finder's decomposed names (unicode-names.ts)
      await fn({ deps, req, res, method, path, asSent, locks, props, ctx, settled: follower.settled });
    } catch (e) {
      if (abort.signal.aborted) {
        // The client went away mid-request (an upload cut off): its own doing, not a server failure.
        deps.log.debug({ method, path, err: e }, 'webdav client went away');
        res.destroy();
        return;
      }
      fail(req, res, method, e);
    }
  }

  function fail(req: IncomingMessage, res: ServerResponse, method: string, e: unknown): void {
    if (res.headersSent) {
      // The client closed the connection while (or, racing Node's 'finish', just after) the body
      // was sent: the access log marks the request aborted; it is not a server failure.
      if ((e as NodeJS.ErrnoException)?.code === 'ERR_STREAM_PREMATURE_CLOSE') deps.log.debug({ method }, 'webdav client went away');
      else deps.log.error({ err: e, method }, 'webdav request failed');
      res.destroy();
      return;
    }
    const status = statusOf(e, method);
    // A DavError is the adapter's own answer to the request (a 502 for a Destination elsewhere), not a
    // fault; a full storage is the operator's to know about, not a failure of ours. A storage that is
    // disabled or failed to init is a known state (its init failure was logged once, as REST does):
    // an error line with a stack for each request into it let any client fill the log.
    if (isVfsError(e, 'NO_SPACE')) deps.log.warn({ method, path: e.path }, 'storage full');
    else if (isVfsError(e, 'STORAGE_UNAVAILABLE')) deps.log.debug({ method, path: e.path, reason: e.message }, 'webdav: storage unavailable');
    else if (status >= 500 && !(e instanceof DavError)) deps.log.error({ err: e, method }, 'webdav request failed');
    const headers: Record<string, string> = {};
    if (status === 401) headers['WWW-Authenticate'] = 'Basic realm="treegate", charset="UTF-8"';
    if (status === 429) headers['Retry-After'] = '60';
    if (status === 405 || status === 501) headers['Allow'] = Object.keys(METHODS).join(', ');
    const condition = e instanceof DavError ? e.condition : undefined;
    const detail = e instanceof DavError ? e.detail : undefined;
    // An unread upload: small ones are drained so the connection can be reused, big ones cut off.
    const pending = Number(req.headers['content-length'] ?? (req.headers['transfer-encoding'] ? Infinity : 0));
    if (!req.complete && pending > 1 << 20) headers['Connection'] = 'close';
    else drain(req);
    sendStatus(res, status, headers, condition ? errorBody(condition, detail) : `${status} ${STATUS_TEXT[status] ?? ''}`.trim());
  }

  return {
    handle(req, res) {
      const p = serve(req, res).catch((e: unknown) => {
        deps.log.error({ err: e }, 'webdav handler crashed');
        if (!res.headersSent) sendStatus(res, 500);
        else res.destroy();
      });
      inflight.add(p);
      void p.finally(() => inflight.delete(p));
    },
    async close() {
      await Promise.race([Promise.allSettled([...inflight]), new Promise((r) => setTimeout(r, 5000).unref())]);
      follower.stop();
    },
  };
}

/**
 * Each request's abort signal (the AccessContext's), handed on to the next request of the same
 * connection when a PUT has finished with it. In Node 20 a new AbortController's signal costs about
 * 6 µs of CPU (an EventTarget whose prototype is swapped), a few percent of a small PUT. Only a
 * signal that nothing listens to any more is handed on, so a listener left behind cannot pile up on
 * a long keep-alive connection, and only after a PUT: a remote read (GET, COPY) can tie signals to
 * it through AbortSignal.any, which no listener count shows. A request whose client goes away
 * aborts its signal as before; the signal is then never handed on.
 */
class ConnectionSignals {
  private readonly idle = new WeakMap<Socket, AbortController>();

  take(socket: Socket): AbortController {
    const ac = this.idle.get(socket);
    if (ac === undefined) return new AbortController();
    this.idle.delete(socket);
    return ac;
  }

  passOn(socket: Socket, ac: AbortController): void {
    if (!ac.signal.aborted && getEventListeners(ac.signal, 'abort').length === 0) this.idle.set(socket, ac);
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 409: 'Conflict',
  412: 'Precondition Failed', 413: 'Payload Too Large', 415: 'Unsupported Media Type', 416: 'Range Not Satisfiable',
  423: 'Locked', 429: 'Too Many Requests', 500: 'Internal Server Error', 501: 'Not Implemented', 502: 'Bad Gateway',
};
