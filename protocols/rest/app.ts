/**
 * buildRestApp(core) → a fastify instance with every REST route (no listen), testable with inject().
 * One error handler renders AList's envelope; one hook logs one line per request; unknown /api
 * routes answer an envelope, other unmatched GETs the web front end (routes/frontend.ts).
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyRequest, type FastifyServerFactory } from 'fastify';
import { parse as parseQuery } from 'node:querystring';
import type { Core } from '../../src/core.js';
import { accessLogger } from '../../src/log.js';
import type { AccessContext, Principal } from '../../src/auth/principal.js';
import type { UserRecord } from '../../src/store/types.js';
import { errorHandler } from './envelope.js';
import { EMPTY_JSON, FORM } from './input.js';
import { registerAuth } from './auth.js';
import authRoutes from './routes/auth.js';
import meRoutes from './routes/me.js';
import publicRoutes from './routes/public.js';
import adminUserRoutes from './routes/admin-user.js';
import adminSettingRoutes from './routes/admin-setting.js';
import fsReadRoutes from './routes/fs-read.js';
import fsWriteRoutes from './routes/fs-write.js';
import fsUploadRoutes from './routes/fs-upload.js';
import downloadRoutes from './routes/download.js';
import adminStorageRoutes from './routes/admin-storage.js';
import adminMetaRoutes from './routes/admin-meta.js';
import adminDriverRoutes from './routes/admin-driver.js';
import taskRoutes from './routes/tasks.js';
import offlineRoutes from './routes/offline.js';
import searchRoutes from './routes/search.js';
import adminIndexRoutes from './routes/admin-index.js';
import { registerFrontend } from './routes/frontend.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller: a logged-in user, the guest (when enabled), or null before the auth hook ran. */
    principal: Principal | null;
    /** The caller's user record (same moment as principal). */
    user: UserRecord | null;
  }
}

/** The AccessContext for a REST request; `password` is the meta path password the client sent. */
export function accessContext(req: FastifyRequest, password?: string): AccessContext {
  if (!req.principal) throw new Error('accessContext before auth');
  return { principal: req.principal, protocol: 'rest', ip: req.ip, password: password || undefined };
}

export interface RestAppOptions {
  /** Lets server.ts put the WebDAV handler in front of fastify on the same HTTP server. */
  serverFactory?: FastifyServerFactory;
}

export async function buildRestApp(core: Core, opts: RestAppOptions = {}): Promise<FastifyInstance> {
  const proxies = core.config.trusted_proxies;
  const log = core.log.child({ proto: 'rest' });
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    // One line per request is logged by our onResponse hook instead of fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: core.config.max_json_body,
    trustProxy: proxies.length ? proxies : false,
    return503OnClosing: true,
    // `/api/fs/list/` is `/api/fs/list`: gin (AList) redirects a trailing slash to the route, and
    // scripts written against it rely on that.
    routerOptions: { ignoreTrailingSlash: true },
    // Errors fastify raises before routing (a URL with a bad percent-escape, ...) get the envelope too.
    frameworkErrors: (err, req, reply) => errorHandler(err, req, reply),
    ...(opts.serverFactory ? { serverFactory: opts.serverFactory } : {}),
  });

  app.decorateRequest('principal', null);
  app.decorateRequest('user', null);
  app.setErrorHandler(errorHandler);

  // AList reads bodies as JSON whatever the content type (clients often send none), and forms too.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('*', { parseAs: 'string' }, (req, body, done) => {
    const text = (body as string).trim();
    const type = String(req.headers['content-type'] ?? '');
    if (text === '') {
      if (/^application\/json\b/i.test(type)) (req as { [EMPTY_JSON]?: boolean })[EMPTY_JSON] = true; // see bodyOf
      return done(null, undefined);
    }
    // curl -d sends JSON labelled as a form: a body that looks like JSON is read as JSON.
    if (type.startsWith('application/x-www-form-urlencoded') && !/^[[{]/.test(text)) return done(null, { ...parseQuery(text), [FORM]: true });
    try {
      done(null, JSON.parse(text));
    } catch {
      const err = new SyntaxError('malformed JSON body') as SyntaxError & { statusCode: number };
      err.statusCode = 400;
      done(err, undefined);
    }
  });

  const access = accessLogger(log);
  app.addHook('onResponse', async (req, reply) => {
    access.info(
      { reqId: req.id, method: req.method, path: req.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime), user: req.user?.username ?? '' },
      'request',
    );
  });

  // The web front end (static folders, SPA fallback, favicon/robots) and the not-found handler:
  // unknown /api routes answer an envelope, other unmatched GETs the front end's index.html.
  await registerFrontend(app, core);

  // ANY /ping is `pong` whatever the body (alist-compat §5): in its own context no body is parsed,
  // or a health check's non-JSON body answered the 400 envelope. Node drops the unread body.
  await app.register(async (ping) => {
    ping.removeAllContentTypeParsers();
    ping.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
    ping.all('/ping', async (_req, reply) => reply.type('text/plain; charset=utf-8').send('pong'));
  });

  registerAuth(app, core);
  for (const routes of [
    authRoutes, meRoutes, publicRoutes, adminUserRoutes, adminSettingRoutes,
    fsReadRoutes, fsWriteRoutes, fsUploadRoutes, downloadRoutes,
    adminStorageRoutes, adminMetaRoutes, adminDriverRoutes, taskRoutes, offlineRoutes,
    searchRoutes, adminIndexRoutes,
  ]) {
    await app.register(routes, { core });
  }
  return app;
}
