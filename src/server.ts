/**
 * The composition root: config → store → accounts/settings → VFS core → HTTP (REST + /dav) and SFTP.
 * The only module in src/ that knows the protocol adapters exist.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import type { DestinationStream } from 'pino';
import { loadConfig, taskTempDir, type ConfigFlags } from './config.js';
import { memTrimmer } from './mem-trim.js';
import { boundHeapGrowth, HEAP_GROWING_PERCENT } from './heap-growth.js';
import { closeQueuedOnHangUp } from './queued-close.js';
import { createLogger } from './log.js';
import { JsonStore } from './store/json-store.js';
import { Accounts } from './auth/accounts.js';
import { adminRequests } from './auth/admin-request.js';
import { Tokens } from './auth/tokens.js';
import { Settings } from './settings/settings.js';
import { createVfsCore } from './vfs/create.js';
import { sendfileAvailable } from './vfs/socket-sendfile.js';
import { Tasks } from './tasks/tasks.js';
import { SearchService } from './search/service.js';
import { firstStart } from './bootstrap.js';
import { VERSION } from './version.js';
import type { Core } from './core.js';
import { buildRestApp } from '../protocols/rest/app.js';
import { createWebdavHandler, DAV_PREFIX } from '../protocols/webdav/handler.js';
import { stripBasePathFromRequest } from '../protocols/rest/frontend/base-path.js';
import { basePathOf } from './site-url.js';
import { httpConnectionCap } from './open-files.js';
import { startSftpServer, type SftpListener } from '../protocols/sftp/server.js';
import { handleCors } from '../protocols/cors.js';
import { continueOnRead } from '../protocols/expect-continue.js';
import { limitIdleClients, trackRequest } from '../protocols/http-idle.js';

export interface RunningServer {
  core: Core;
  http: { address: string; port: number };
  sftp?: Pick<SftpListener, 'address' | 'port' | 'channels'>;
  /** Graceful stop: listeners close, in-flight requests finish (bounded), the store is flushed. */
  close(): Promise<void>;
}

export interface StartOptions {
  env?: NodeJS.ProcessEnv;
  /** Where logs go (tests capture them); stdout by default. */
  logDestination?: DestinationStream;
}

/** How long a graceful stop waits for in-flight requests before cutting connections. */
const DRAIN_MS = 10_000;
/** How long a graceful stop then waits for cut-off writes to fail and clean up. */
const SETTLE_MS = 5_000;
/** How long a stop waits for its last log lines to be written. */
const FLUSH_WAIT_MS = 2_000;

/**
 * Requests for the WebDAV handler: everything under /dav, and a plain OPTIONS of the site root
 * (not a CORS preflight, which carries Origin). Windows' WebDAV redirector asks `OPTIONS /` before
 * it maps a folder below it, and gives up on a 404.
 */
function isDav(req: IncomingMessage): boolean {
  const url = req.url;
  if (!url) return false;
  if (url === DAV_PREFIX || url.startsWith(DAV_PREFIX + '/') || url.startsWith(DAV_PREFIX + '?')) return true;
  return req.method === 'OPTIONS' && url === '/' && req.headers.origin === undefined;
}

/**
 * A request target in absolute-form (`GET http://host/dav/x HTTP/1.1`) as origin-form (`/dav/x`).
 * RFC 9112 §3.2.2: a server must accept it, and everything after dispatch matches on the path:
 * WebDAV was not recognised (fastify answered 404), base_path was not stripped, and /d and /p read
 * the file path out of the raw URL (a valid sign was refused).
 */
export function originForm(url: string): string {
  const m = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(url);
  if (!m) return url; // origin-form, or `*` (OPTIONS *)
  const rest = url.slice(m[0].length);
  return rest.startsWith('/') ? rest : '/' + rest;
}

const LISTEN_ERRORS: Record<string, string> = {
  EADDRINUSE: 'the port is already in use (another treegate or service?)',
  EADDRNOTAVAIL: 'the address is not one of this machine\'s',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  ENOTFOUND: 'the address does not resolve',
  EAI_AGAIN: 'the address does not resolve (yet: is the network up?)',
};

/**
 * A listener's failure to bind, as one line naming the listener and its config keys: node's bare
 * `listen EADDRINUSE: address already in use 0.0.0.0:5222` did not say which of the two listeners,
 * nor which setting to change. Other errors are passed on unchanged.
 */
function listenError(listener: 'http' | 'sftp', address: string, port: number, err: unknown): unknown {
  const why = LISTEN_ERRORS[(err as NodeJS.ErrnoException)?.code ?? ''];
  if (!why) return err;
  return new Error(`${listener.toUpperCase()} listener (${listener}.address ${JSON.stringify(address)}, ${listener}.port ${port}): cannot listen: ${why}`);
}

/** `address:port` as a URL authority: an IPv6 address in brackets (`[::1]:5244`, not `::1:5244`). */
function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

export async function startServer(flags: ConfigFlags = {}, opts: StartOptions = {}): Promise<RunningServer> {
  const env = opts.env ?? process.env;
  const heapBounded = boundHeapGrowth(); // before the server allocates anything (heap-growth.ts)
  const config = await loadConfig(flags, env);
  // base_path (site_url's path, e.g. `/tg` behind a reverse proxy): see the HTTP server below.
  const basePath = basePathOf(config.site_url);
  const log = createLogger(config.log.level, opts.logDestination);
  for (const w of config.warnings ?? []) log.warn(w);
  // The server is the store's one writer while it runs (owner marker in DATA; see store/owner.ts).
  const store = await JsonStore.open(join(config.dataDir, 'store.json'), { watch: true, owner: true, onReloadError: (err) => log.error(err.message) });
  await firstStart(store, config.dataDir, log, env);
  store.onExternalChange(() => log.info('store reloaded from its file (changed by another process, or a failed write undone)'));

  const accounts = new Accounts(store);
  store.onRequest(adminRequests(accounts, log)); // `treegate admin set|random` while we run
  const tokens = new Tokens(config.jwt_secret, config.token_expires_in, store);
  const settings = await Settings.load(store, VERSION);
  const vfsCore = createVfsCore({ store, log, dataDir: config.dataDir });
  const tasks = await Tasks.start({
    store, accounts, settings, vfs: vfsCore.vfs, log, tempDir: taskTempDir(config),
  });
  const search = new SearchService({ dataDir: config.dataDir, settings, vfs: vfsCore.vfs, mounts: vfsCore.mounts, rules: vfsCore.rules, log });
  const core: Core = { ...vfsCore, version: VERSION, config, log, store, accounts, tokens, settings, tasks, search };
  // Storages initialise in the background: a slow or failing one never blocks start-up.
  const loading = vfsCore.storages.loadAll().catch((err: unknown) => log.error({ err }, 'loading storages failed'));
  // Resumed tasks need their storages: workers start once loading is over.
  void loading.then(() => tasks.manager.resume());
  // The index (and a build a previous run left unfinished) needs the storages too.
  void loading.then(() => search.start());

  const dav = config.webdav.enable ? createWebdavHandler(core) : undefined;
  /** Answers under way: a stop makes each the last on its connection (see close). */
  const answering = new Set<ServerResponse>();
  const closeQueued = closeQueuedOnHangUp();
  const transferEnded = memTrimmer();
  /** Open connections, for the stop: see close. */
  const sockets = new Set<Socket>();
  /** Set once a graceful stop has begun. */
  let closing: Promise<void> | undefined;
  const app = await buildRestApp(core, {
    serverFactory: (handler) => {
      const dispatch = (req: IncomingMessage, res: ServerResponse) => {
        const untrack = trackRequest(req); // for the idle limit below
        const unqueue = closeQueued(req, res);
        answering.add(res);
        const socket = req.socket;
        const moved = () => socket.bytesRead + socket.bytesWritten;
        const movedBefore = moved();
        // One listener for all of this bookkeeping (see trackRequest).
        res.once('close', () => {
          untrack();
          unqueue();
          answering.delete(res);
          // An answer that was under way when a stop began (its keep-alive promised in headers
          // already sent) leaves its connection idle: closed now, not at its keep-alive timeout.
          if (closing) (app.server as Server).closeIdleConnections();
          transferEnded(moved() - movedBefore); // a big upload's freed buffers go back (mem-trim.ts)
        });
        if (req.url && !req.url.startsWith('/')) req.url = originForm(req.url);
        // base_path is removed here, once, before dispatching, so WebDAV and every REST route
        // (/api, /d, /p, the front end) see unprefixed URLs.
        stripBasePathFromRequest(req, basePath);
        if (handleCors(config.cors, req, res)) return;
        return dav && isDav(req) ? dav.handle(req, res) : handler(req, res);
      };
      const server = createServer(dispatch).on('connection', (socket: Socket) => {
        sockets.add(socket);
        socket.once('close', () => sockets.delete(socket));
      }).on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
        continueOnRead(req, res);
        return dispatch(req, res);
      });
      const cap = httpConnectionCap(); // src/open-files.ts
      if (cap !== undefined) {
        server.maxConnections = cap;
        let warned = 0;
        server.on('drop', () => {
          if (Date.now() - warned < 60_000) return; // once a minute at most: a flood must not flood the log
          warned = Date.now();
          log.warn({ max: cap }, 'HTTP connection limit reached: new connections are closed');
        });
      }
      // No cap on a whole request (Node's 5 min cut off long uploads); a body that stalls for
      // http.idle_timeout is cut off instead (protocols/http-idle.ts).
      limitIdleClients(server, Math.max(1, config.http.idle_timeout) * 1000, (req) =>
        log.info({ method: req.method, path: req.url?.split('?')[0] }, `request body stalled for ${config.http.idle_timeout} s: connection closed`),
      );
      return server;
    },
  });
  // A listener that cannot start stops the start, and undoes it: the store is closed (its owner
  // marker in DATA removed) and the background work stopped, as on a graceful stop.
  const abortStart = async () => {
    await app.close().catch(() => undefined);
    await loading;
    await tasks.close();
    await search.close();
    await vfsCore.mounts.dropAll();
    await store.close();
  };
  try {
    await app.listen({ host: config.http.address, port: config.http.port });
  } catch (err) {
    await abortStart();
    throw listenError('http', config.http.address, config.http.port, err);
  }
  const httpAddr = app.server.address() as AddressInfo;

  let sftp: SftpListener | undefined;
  if (config.sftp.enable) {
    try {
      sftp = await startSftpServer(core);
    } catch (err) {
      await abortStart();
      throw listenError('sftp', config.sftp.address, config.sftp.port, err);
    }
  }

  const http = { address: httpAddr.address, port: httpAddr.port };
  // The contract's ready line goes out at any log.level (warn, error, silent): a child at info on the
  // same destination, same format.
  log.child({}, { level: 'info' }).info(
    {
      http: hostPort(http.address, http.port),
      sftp: sftp ? hostPort(sftp.address, sftp.port) : 'off',
      webdav: dav ? DAV_PREFIX : 'off',
      // Whether local downloads go out by sendfile(2): says if the native addon was built.
      sendfile: sendfileAvailable,
      // V8's old-generation growth step (heap-growth.ts), or the operator's own when they set one.
      heap_growing_percent: heapBounded ? HEAP_GROWING_PERCENT : 'operator',
      version: VERSION,
    },
    `treegate ready: http://${hostPort(http.address, http.port)}` + (sftp ? ` sftp://${hostPort(sftp.address, sftp.port)}` : ''),
  );
  log.flush(); // whoever started us waits for this line

  const close = () =>
    (closing ??= (async () => {
      const server = app.server as Server;
      const force = setTimeout(() => server.closeAllConnections(), DRAIN_MS);
      force.unref();
      // A keep-alive connection whose answer is under way ends with it (Connection: close): left
      // open, it held the stop until its keep-alive timeout. Idle ones app.close() ends at once.
      for (const res of answering) if (!res.headersSent) res.shouldKeepAlive = false;
      // A connection that never sent a byte (a browser's preconnect, a client pool's spare) has no
      // request to finish, but Node counts it as active until its headers timeout, not as idle:
      // closeIdleConnections() left it, and it held every stop for the whole DRAIN_MS.
      for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
      await Promise.allSettled([app.close(), sftp?.close(), dav?.close()]);
      clearTimeout(force);
      // Uploads the listeners cut off fail like any aborted upload and their drivers remove what
      // they wrote (a temp file); tasks stopped below do the same. Wait (bounded) for all of that
      // before the drivers and the store go and the process exits.
      const writes = vfsCore.vfs.settled(SETTLE_MS);
      await loading;
      await tasks.close();
      await search.close();
      if (!(await writes)) log.warn({ writes: vfsCore.vfs.pendingWrites }, 'stopping with writes still under way');
      await vfsCore.mounts.dropAll();
      await store.close();
      log.info('treegate stopped');
      // Written now, not by the synchronous flush at exit: a stdout that fails (the terminal closed)
      // then turns logging off (log.ts) instead of holding the exit. Bounded: a pipe nobody reads.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, FLUSH_WAIT_MS);
        log.flush(() => (clearTimeout(timer), resolve()));
      });
    })());

  return { core, http, sftp: sftp && { address: sftp.address, port: sftp.port, channels: sftp.channels }, close };
}
