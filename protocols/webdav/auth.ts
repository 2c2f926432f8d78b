/**
 * HTTP Basic authentication for WebDAV: the user's own password, checked by Accounts (shared login
 * throttle, verified-credential cache, disabled and protocol-bit refusal). Users with 2FA are refused
 * (403): Basic cannot carry a one-time code, and accepting the password alone would make WebDAV the
 * way around 2FA. As AList, `Authorization: Bearer <the admin API token>` (setting `token`) is the
 * admin: scripts that hold that token reach WebDAV with it too.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { principalOf, type LoginResult } from '../../src/auth/accounts.js';
import { safeEqual } from '../../src/auth/passwords.js';
import type { Principal } from '../../src/auth/principal.js';
import { DavError } from './errors.js';
import type { DavDeps } from './request.js';

export const REALM = 'treegate';
export const CHALLENGE = `Basic realm="${REALM}", charset="UTF-8"`;

export function parseBasic(header: string | undefined): { username: string; password: string } | undefined {
  if (!header) return undefined;
  const m = /^basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!m) return undefined;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const i = text.indexOf(':');
  if (i < 0) return undefined;
  return { username: text.slice(0, i), password: text.slice(i + 1) };
}

/**
 * Per connection, the Authorization header last verified on it and its credential's key in Accounts'
 * cache. A client sends the same header with every request of a keep-alive connection; parsing it
 * and hashing the credential again was a tenth of the server's CPU per small PUT. The header is only
 * compared with the next request's on the same connection (which carries it anyway) and goes with
 * the connection. The answer still comes from Accounts' cache, so expiry, a password change, a
 * disabled or deleted user end it as before. (A proxy's connection carrying several clients is
 * fine: another client's header differs and takes the full path; an equal one is the same key,
 * still refused to a client whose address is locked out for guessing: see Accounts.cachedLogin.)
 */
export class ConnectionCredentials {
  private readonly known = new WeakMap<Socket, { header: string; key: string }>();

  get(req: IncomingMessage): string | undefined {
    const k = this.known.get(req.socket);
    return k !== undefined && k.header === req.headers.authorization ? k.key : undefined;
  }

  set(req: IncomingMessage, key: string): void {
    const header = req.headers.authorization;
    if (header !== undefined) this.known.set(req.socket, { header, key });
  }
}

/** The request's principal; synchronous when the credential is in Accounts' cache (most requests). */
export function authenticate(deps: DavDeps, req: IncomingMessage, ip: string, connections: ConnectionCredentials): Principal | Promise<Principal> {
  const knownKey = connections.get(req);
  const known = knownKey === undefined ? undefined : deps.accounts.cachedLogin(knownKey, ip);
  if (known) return known.principal;
  const bearer = /^bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
  if (bearer !== undefined) return adminByApiToken(deps, bearer);
  const cred = parseBasic(req.headers.authorization);
  if (!cred) throw new DavError(401, 'authentication required');
  const key = deps.accounts.credentialKey('webdav', cred.username, cred.password);
  const r = deps.accounts.authenticateCached({ ...cred, ip, protocol: 'webdav', skipOtp: false }, key);
  const remembered = (r: LoginResult) => {
    const principal = principalOrThrow(r);
    connections.set(req, key);
    return principal;
  };
  return r instanceof Promise ? r.then(remembered) : remembered(r);
}

async function adminByApiToken(deps: DavDeps, token: string): Promise<Principal> {
  const apiToken = deps.settings.get('token');
  if (apiToken === '' || !safeEqual(token, apiToken)) throw new DavError(401, 'bad credentials');
  const admin = await deps.accounts.admin();
  if (!admin) throw new DavError(401, 'bad credentials');
  return principalOf(admin);
}

function principalOrThrow(r: LoginResult): Principal {
  if (r.ok) return r.principal;
  switch (r.reason) {
    case 'throttled':
      throw new DavError(429, 'too many failed logins, try again later');
    case 'no_user':
    case 'bad_password':
      throw new DavError(401, 'bad credentials');
    case 'otp_required':
      throw new DavError(403, 'this user has two-factor authentication, which WebDAV cannot carry');
    case 'disabled':
    case 'protocol_denied':
      throw new DavError(403, 'WebDAV access is not allowed for this user');
  }
}
