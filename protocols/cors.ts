/**
 * Cross-origin requests (the `cors` config, AList's keys and defaults: every origin, method and
 * header), for everything on the HTTP port: a web front end or app served from another origin calls
 * /api, /d, /p and /dav the way AList lets it. Credentials travel in the Authorization header, never
 * in cookies, so allowing other origins hands them nothing a page could not already send.
 *
 * As gin-contrib/cors (AList's middleware): a request without `Origin` is untouched; a preflight
 * (OPTIONS with Access-Control-Request-Method) is answered here, 204 when the origin is allowed and
 * 403 when not; other requests from an allowed origin get Access-Control-Allow-Origin. One
 * difference: `*` among the allowed headers (or methods) answers with the ones the preflight asked
 * for, because browsers never let a literal `*` cover Authorization, which every API call carries.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CorsConfig } from '../src/config.js';

/** How long browsers may reuse a preflight's answer (gin-contrib/cors's default, 12 hours). */
const MAX_AGE_S = 12 * 3600;

/** The Access-Control-Allow-Origin value for `origin`, or undefined when it is not allowed. */
function allowedOrigin(cfg: CorsConfig, origin: string): string | undefined {
  if (cfg.allow_origins.includes('*')) return '*';
  return cfg.allow_origins.includes(origin) ? origin : undefined;
}

/** The allowed list as a header value; `*` stands for what the browser asked for. */
function allowList(list: string[], asked: string | undefined): string | undefined {
  if (list.includes('*')) return asked ?? '*';
  return list.length ? list.join(', ') : undefined;
}

/**
 * Apply the CORS rules to a request before it is dispatched. True when the request has been
 * answered (a preflight); the caller then does nothing more with it.
 */
export function handleCors(cfg: CorsConfig, req: IncomingMessage, res: ServerResponse): boolean {
  const origin = req.headers.origin;
  if (origin === undefined || cfg.allow_origins.length === 0) return false;
  const allow = allowedOrigin(cfg, origin);
  const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
  // A specific origin echoed back makes the answer depend on it: caches must keep them apart.
  if (allow !== '*') res.setHeader('Vary', 'Origin');
  if (!preflight) {
    if (allow) res.setHeader('Access-Control-Allow-Origin', allow);
    return false;
  }
  req.resume();
  if (!allow) {
    res.writeHead(403, { 'Content-Length': 0 }).end();
    return true;
  }
  // No Content-Length: RFC 9110 §8.6 forbids it on a 204 (Node frames a 204 as bodiless anyway).
  const headers: Record<string, string | number> = { 'Access-Control-Allow-Origin': allow, 'Access-Control-Max-Age': MAX_AGE_S };
  const methods = allowList(cfg.allow_methods, req.headers['access-control-request-method']);
  const allowHeaders = allowList(cfg.allow_headers, req.headers['access-control-request-headers']);
  if (methods) headers['Access-Control-Allow-Methods'] = methods;
  if (allowHeaders) headers['Access-Control-Allow-Headers'] = allowHeaders;
  res.writeHead(204, headers).end();
  return true;
}
