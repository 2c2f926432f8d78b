/**
 * User administration (alist-compat §8) and admins' view of users' SSH keys (§4). The admin role is
 * enforced for all /api/admin/* routes by the auth hook. Every change ends cached WebDAV credentials
 * at once (accounts.forgetCredentials), and password or profile changes end the user's tokens.
 */
import type { FastifyRequest } from 'fastify';
import type { RoutePlugin } from '../route-types.js';
import { ApiError, ok } from '../envelope.js';
import { bodyObject, optBool, optInt, optShortString, optString, pageOf, paging, queryId, queryString, reqShortString, MAX_SSO_ID_CHARS, MAX_USERNAME_CHARS, type Fields } from '../input.js';
import { keyView, notFound404, storeConflict } from './me.js';
import { ROLE } from '../../../src/auth/principal.js';
import { hashPassword, newSalt } from '../../../src/auth/passwords.js';
import { deleteKey, deleteUserKeys, listKeys } from '../../../src/auth/sshkeys.js';
import { normalize } from '../../../src/paths.js';
import { isVfsError } from '../../../src/errors.js';
import type { UserRecord } from '../../../src/store/types.js';

const OLD_USER_MISSING = 'failed get old user: record not found';
const MAX_PERMISSION = 0x7fffffff;

/** AList's admin User JSON: no `otp`, `password` always "". */
export function userView(u: UserRecord) {
  return { id: u.id, username: u.username, password: '', base_path: u.base_path, role: u.role, disabled: u.disabled, permission: u.permission, sso_id: u.sso_id };
}

/** A client base path, cleaned; `..` is refused rather than resolved. */
function cleanBasePath(p: string | undefined): string {
  try {
    return normalize(p ?? '/');
  } catch (e) {
    if (isVfsError(e, 'INVALID')) throw new ApiError(400, 'invalid request: base_path must not contain .. or backslashes');
    throw e;
  }
}

/** The editable fields of a User JSON body, typed; absent fields are undefined. */
function userFields(body: Fields) {
  return {
    username: reqShortString(body, 'username', MAX_USERNAME_CHARS),
    password: optString(body, 'password') ?? '',
    base_path: optString(body, 'base_path'),
    role: optInt(body, 'role'),
    disabled: optBool(body, 'disabled'),
    permission: optInt(body, 'permission', 0, MAX_PERMISSION),
    sso_id: optShortString(body, 'sso_id', MAX_SSO_ID_CHARS),
  };
}

const routes: RoutePlugin = async (app, { core }) => {
  const { store, accounts } = core;

  const userById = async (req: FastifyRequest, param = 'id'): Promise<UserRecord> => {
    const id = queryId(req, param, `invalid request: ${param} must be an integer`);
    const user = await store.users.get(id);
    if (!user) throw new ApiError(500, OLD_USER_MISSING);
    return user;
  };

  app.get('/api/admin/user/list', async (req) => {
    const users = await store.users.list();
    return ok({ content: pageOf(users, paging(req)).map(userView), total: users.length });
  });

  app.get('/api/admin/user/get', async (req) => ok(userView(await userById(req))));

  app.post('/api/admin/user/create', async (req) => {
    const f = userFields(bodyObject(req));
    const role = f.role ?? ROLE.GENERAL;
    if (role === ROLE.ADMIN || role === ROLE.GUEST) throw new ApiError(400, 'admin or guest user can not be created');
    if (role !== ROLE.GENERAL) throw new ApiError(400, 'invalid request: role must be 0');
    const salt = newSalt();
    await store.users
      .insert({
        username: f.username, salt, pwd_hash: await hashPassword(f.password, salt), pwd_ts: Math.floor(Date.now() / 1000),
        base_path: cleanBasePath(f.base_path), role, disabled: f.disabled ?? false, permission: f.permission ?? 0,
        sso_id: f.sso_id ?? '', otp_secret: '',
      })
      .catch(storeConflict);
    accounts.forgetCredentials();
    return ok();
  });

  app.post('/api/admin/user/update', async (req) => {
    const body = bodyObject(req);
    const id = optInt(body, 'id', 1);
    if (id === undefined) throw new ApiError(400, 'invalid request: id is required');
    const f = userFields(body);
    // The slow hash first: the record read below is then the one the patch is built on and written
    // over at once. Read before the hash, a change made meanwhile (the user's own new password, with
    // the same second's pwd_ts) was lost, and a token issued in between stayed valid.
    const salt = f.password !== '' ? newSalt() : undefined;
    const pwdHash = salt === undefined ? undefined : await hashPassword(f.password, salt);
    const old = await store.users.get(id);
    if (!old) throw new ApiError(500, OLD_USER_MISSING);
    if (f.role !== undefined && f.role !== old.role) throw new ApiError(400, 'role can not be changed');
    if (old.role === ROLE.ADMIN && f.disabled === true) throw new ApiError(400, 'admin user can not be disabled');
    const patch: Partial<UserRecord> = {
      username: f.username,
      base_path: f.base_path === undefined ? old.base_path : cleanBasePath(f.base_path),
      disabled: f.disabled ?? old.disabled,
      permission: f.permission ?? old.permission,
      sso_id: f.sso_id ?? old.sso_id,
      // AList ends the user's tokens on every update (its pwd_ts drops to 0 without a password);
      // a strictly newer pwd_ts does the same and stays monotonic, so no old token can match again.
      pwd_ts: accounts.nextPwdTs(old),
    };
    if (salt !== undefined) Object.assign(patch, { salt, pwd_hash: pwdHash });
    await store.users.update(id, patch).catch(storeConflict);
    accounts.forgetCredentials();
    return ok();
  });

  app.post('/api/admin/user/delete', async (req) => {
    const user = await userById(req);
    if (user.role === ROLE.ADMIN || user.role === ROLE.GUEST) throw new ApiError(500, 'cannot delete admin or guest');
    await store.users.delete(user.id);
    await deleteUserKeys(store, user.id);
    accounts.forgetCredentials();
    return ok();
  });

  app.post('/api/admin/user/cancel_2fa', async (req) => {
    const user = await userById(req);
    await store.users.update(user.id, { otp_secret: '' });
    accounts.forgetCredentials();
    // A lock of wrong codes would outlive the 2FA it guarded and refuse the user's codes once
    // they switch it on again.
    accounts.otpGuard.succeed(user.id);
    return ok();
  });

  // AList drops its user cache; treegate has none beyond the credential cache, which this clears.
  app.post('/api/admin/user/del_cache', async () => {
    accounts.forgetCredentials();
    return ok();
  });

  app.get('/api/admin/user/sshkey/list', async (req) => {
    const uid = queryId(req, 'uid', 'user id format invalid');
    if (!(await store.users.get(uid))) throw new ApiError(404, 'user invalid');
    const keys = await listKeys(store, uid);
    return ok({ content: pageOf(keys, paging(req)).map(keyView), total: keys.length });
  });

  app.post('/api/admin/user/sshkey/delete', async (req) => {
    const id = queryId(req, 'id', 'id format invalid');
    // The front end also sends uid; when it does, the key must belong to that user.
    const uidText = queryString(req, 'uid');
    const uid = uidText === '' ? undefined : queryId(req, 'uid', 'user id format invalid');
    await deleteKey(store, id, uid).catch(notFound404);
    accounts.forgetCredentials(); // SFTP sessions opened with this key end (sftp/server.ts)
    return ok();
  });
};

export default routes;
