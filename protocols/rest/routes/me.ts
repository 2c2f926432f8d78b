/**
 * The current user: profile, profile update and own SSH keys (api-spec §4.1, alist-compat §2-§4).
 */
import type { FastifyRequest } from 'fastify';
import type { RoutePlugin } from '../route-types.js';
import { ApiError, ok } from '../envelope.js';
import { bodyObject, optShortString, optString, pageOf, paging, queryId, reqShortString, MAX_SSO_ID_CHARS, MAX_USERNAME_CHARS } from '../input.js';
import { currentUser } from '../auth.js';
import { can } from '../../../src/auth/principal.js';
import { addKey, deleteKey, listKeys } from '../../../src/auth/sshkeys.js';
import { formatTime } from '../entry.js';
import { isVfsError } from '../../../src/errors.js';
import type { SshKeyRecord, UserRecord } from '../../../src/store/types.js';

/** AList's User JSON for /api/me: secrets never leave, `password` is always "". */
export function meView(u: UserRecord) {
  return {
    id: u.id, username: u.username, password: '', base_path: u.base_path, role: u.role,
    disabled: u.disabled, permission: u.permission, sso_id: u.sso_id, otp: u.otp_secret !== '',
  };
}

/** The JSON the API shows of an SSH key (key text, blob and owner stay private); times as AList writes them. */
export function keyView(k: SshKeyRecord) {
  return {
    id: k.id, title: k.title, fingerprint: k.fingerprint,
    added_time: formatTime(new Date(k.added_time)), last_used_time: formatTime(new Date(k.last_used_time)),
  };
}

/** Store errors a user can cause (duplicate names, titles) answer 500 with the store's text, as AList's DB errors do. */
export function storeConflict(e: unknown): never {
  if (isVfsError(e, 'EXISTS')) throw new ApiError(500, e.message);
  throw e;
}

const routes: RoutePlugin = async (app, { core }) => {
  const { store, accounts } = core;

  app.get('/api/me', async (req) => ok(meView(currentUser(req))));

  app.post('/api/me/update', async (req) => {
    const user = currentUser(req);
    if (can.isGuest(req.principal!)) throw new ApiError(403, 'Guest user can not update profile');
    const body = bodyObject(req);
    const username = reqShortString(body, 'username', MAX_USERNAME_CHARS);
    const password = optString(body, 'password') ?? '';
    const ssoId = optShortString(body, 'sso_id', MAX_SSO_ID_CHARS) ?? '';
    await store.users.update(user.id, { username, sso_id: ssoId }).catch(storeConflict);
    // A new password gets a new pwd_ts, which ends every token of this user (including this one).
    if (password !== '') await accounts.setPassword(user.id, password);
    accounts.forgetCredentials();
    return ok();
  });

  // SSH keys: the guest has none and cannot add any (AList answers 401 `user invalid`).
  const owner = (req: FastifyRequest): UserRecord => {
    const user = currentUser(req);
    if (can.isGuest(req.principal!)) throw new ApiError(401, 'user invalid');
    return user;
  };

  app.get('/api/me/sshkey/list', async (req) => {
    const user = owner(req);
    const keys = await listKeys(store, user.id);
    return ok({ content: pageOf(keys, paging(req)).map(keyView), total: keys.length });
  });

  app.post('/api/me/sshkey/add', async (req) => {
    const user = owner(req);
    const body = bodyObject(req);
    const title = optString(body, 'title') ?? '';
    const key = optString(body, 'key') ?? '';
    if (title === '' || key === '') throw new ApiError(400, 'request invalid');
    try {
      await addKey(store, user.id, title, key);
    } catch (e) {
      if (isVfsError(e, 'INVALID')) throw new ApiError(400, e.message);
      storeConflict(e);
    }
    return ok();
  });

  app.post('/api/me/sshkey/delete', async (req) => {
    const user = owner(req);
    const id = queryId(req, 'id', 'id format invalid');
    await deleteKey(store, id, user.id).catch(notFound404);
    accounts.forgetCredentials(); // SFTP sessions opened with this key end (sftp/server.ts)
    return ok();
  });
};

/** NOT_FOUND answers 404 here (AList's sshkey handlers), not the file-system 500. */
export function notFound404(e: unknown): never {
  if (isVfsError(e, 'NOT_FOUND')) throw new ApiError(404, e.message);
  throw e;
}

export default routes;
