/**
 * Who is calling: one onRequest hook for every `/api/...` route, AList's Auth middleware.
 *
 * - Routes under /api need an identity unless they declare `config: { auth: false }` (login,
 *   /api/public/*). Routes outside /api (/ping, /d, /p, static files; /dav never reaches fastify)
 *   are not touched. Unknown routes are not either, so they answer the 404 envelope.
 * - Identity: the `Authorization` header holds the raw token (no `Bearer`). An empty header means
 *   the guest (401 when the guest is disabled); the admin API `token` setting means the admin;
 *   anything else must be a valid login token of an existing, enabled user whose pwd_ts matches.
 * - /api/admin/* additionally needs the admin role and /api/task/* a non-guest, decided here from
 *   the matched route pattern so that no admin route can forget its guard. Route plugins add the
 *   exported guards as preHandlers for anything finer (e.g. /api/fs/link).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Core } from '../../src/core.js';
import type { UserRecord } from '../../src/store/types.js';
import { principalOf } from '../../src/auth/accounts.js';
import { can, type Principal } from '../../src/auth/principal.js';
import { safeEqual } from '../../src/auth/passwords.js';
import type { TokenClaims } from '../../src/auth/tokens.js';
import { ApiError } from './envelope.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** false: the route takes no identity (login, public endpoints). Default: required under /api. */
    auth?: boolean;
  }
  interface FastifyRequest {
    /** Claims of the login token the request presented (null for guest or the admin API token). */
    tokenClaims: TokenClaims | null;
  }
}

export const MSG = {
  GUEST_DISABLED: 'Guest user is disabled, login please',
  PASSWORD_CHANGED: 'Password has been changed, login please',
  USER_DISABLED: 'Current user is disabled, replace please',
  NO_USER: 'failed find user: record not found',
  GUEST: 'You are a guest',
  NOT_ADMIN: 'You are not an admin',
} as const;

export interface Identity {
  user: UserRecord;
  principal: Principal;
  claims: TokenClaims | null;
}

/**
 * Resolve an Authorization header value to an identity, or throw ApiError 401 with AList's message.
 * Exported for adapters that read a token outside the hook.
 */
export async function identify(core: Core, header: string): Promise<Identity> {
  const { accounts, tokens, settings } = core;
  if (header === '') {
    const guest = await accounts.guest();
    if (!guest || guest.disabled) throw new ApiError(401, MSG.GUEST_DISABLED);
    return { user: guest, principal: principalOf(guest), claims: null };
  }
  const apiToken = settings.get('token');
  if (apiToken !== '' && safeEqual(header, apiToken)) {
    const admin = await accounts.admin();
    if (!admin) throw new ApiError(401, MSG.NO_USER);
    return { user: admin, principal: principalOf(admin), claims: null };
  }
  const check = await tokens.verify(header);
  if (!check.ok) throw new ApiError(401, check.message);
  const user = await accounts.byId(check.claims.uid);
  if (!user || user.username !== check.claims.username) throw new ApiError(401, MSG.NO_USER);
  if (user.pwd_ts !== check.claims.pwdTs) throw new ApiError(401, MSG.PASSWORD_CHANGED);
  if (user.disabled) throw new ApiError(401, MSG.USER_DISABLED);
  return { user, principal: principalOf(user), claims: check.claims };
}

/** The header as one string ('' when absent). */
function authorizationOf(req: FastifyRequest): string {
  const h = req.headers.authorization;
  return typeof h === 'string' ? h.trim() : '';
}

/** Guard: an identity (guest or user) must have been resolved. */
export async function requireUser(req: FastifyRequest): Promise<void> {
  if (!req.principal) throw new ApiError(401, MSG.GUEST_DISABLED);
}

/** Guard: a logged-in user, not the guest (403 `You are a guest`). */
export async function requireNonGuest(req: FastifyRequest): Promise<void> {
  await requireUser(req);
  if (can.isGuest(req.principal!)) throw new ApiError(403, MSG.GUEST);
}

/** Guard: the admin role (403 `You are not an admin`). */
export async function requireAdmin(req: FastifyRequest): Promise<void> {
  await requireUser(req);
  if (!can.isAdmin(req.principal!)) throw new ApiError(403, MSG.NOT_ADMIN);
}

/** The request's user record; for handlers behind the hook (never null there). */
export function currentUser(req: FastifyRequest): UserRecord {
  if (!req.user) throw new ApiError(401, MSG.GUEST_DISABLED);
  return req.user;
}

/**
 * Identify the caller of an /api route and apply the guards its path implies: /api/admin/ needs the
 * admin role, /api/task/ a non-guest. Also run for /api paths no route serves (the not-found
 * handler), so an unknown admin path answers an anonymous caller 401 as a known one does.
 */
export async function authorizeApi(core: Core, req: FastifyRequest, path: string): Promise<void> {
  const id = await identify(core, authorizationOf(req));
  req.user = id.user;
  req.principal = id.principal;
  req.tokenClaims = id.claims;
  if (path.startsWith('/api/admin/')) await requireAdmin(req);
  else if (path.startsWith('/api/task/')) await requireNonGuest(req);
}

export function registerAuth(app: FastifyInstance, core: Core): void {
  app.decorateRequest('tokenClaims', null);
  app.addHook('onRequest', async (req) => {
    const route = req.routeOptions.url;
    // No route matched (the not-found handler decides), not an API route, or a route that opted out.
    if (route === undefined || !route.startsWith('/api/') || req.routeOptions.config.auth === false) return;
    await authorizeApi(core, req, route);
  });
}
