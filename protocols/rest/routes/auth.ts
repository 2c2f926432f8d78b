/**
 * Login, logout and 2FA set-up (api-spec §4.1, alist-compat §2). Every login decision is
 * Accounts.authenticate; this file only maps its `reason` to AList's codes and messages.
 */
import type { FastifyRequest } from 'fastify';
import type { RoutePlugin } from '../route-types.js';
import { ApiError, ok } from '../envelope.js';
import { bodyObject, optString, reqString } from '../input.js';
import { currentUser, requireUser } from '../auth.js';
import { fields } from '../fs-common.js';
import { checkTotp, type LoginFailure } from '../../../src/auth/accounts.js';
import { can } from '../../../src/auth/principal.js';
import { isTotpSecret, newTotpSecret, otpauthUrl, qrDataUrl } from '../../../src/auth/totp.js';
import { VfsError } from '../../../src/errors.js';

const FAILURE: Record<LoginFailure, [number, string]> = {
  throttled: [429, new VfsError('TOO_MANY_ATTEMPTS').message],
  no_user: [400, 'failed find user: record not found'],
  bad_password: [400, 'password is incorrect'],
  otp_required: [402, 'Invalid 2FA code'],
  // AList issues a token to a disabled user and refuses it on use; treegate refuses at login (decision 3).
  disabled: [403, 'Current user is disabled, replace please'],
  protocol_denied: [403, 'permission denied'],
};

const GUEST_2FA = 'Guest user can not generate 2FA code';
const NO_AUTH = { config: { auth: false } } as const;

const routes: RoutePlugin = async (app, { core }) => {
  const login = (hashed: boolean) => async (req: FastifyRequest) => {
    // gin's ShouldBind: a POST without a body binds the query string (Go's req.Form holds it), so
    // `POST /api/auth/login?username=..&password=..` logs in as on AList; a body wins when present.
    const body = fields(req);
    const username = reqString(body, 'username', 'invalid request: username is required');
    const password = optString(body, 'password') ?? '';
    const otp = optString(body, 'otp_code') ?? '';
    const r = await core.accounts.authenticate({
      username,
      ...(hashed ? { hashed: password } : { password }),
      otp,
      ip: req.ip,
      protocol: 'rest',
    });
    if (!r.ok) {
      // AList checks an empty hash only after finding the user, with its own message.
      if (r.reason === 'bad_password' && hashed && password === '') throw new ApiError(400, 'password is empty');
      const [code, message] = FAILURE[r.reason];
      throw new ApiError(code, message);
    }
    return ok({ token: await core.tokens.issue(r.user) });
  };

  app.post('/api/auth/login', NO_AUTH, login(false));
  app.post('/api/auth/login/hash', NO_AUTH, login(true));

  app.get('/api/auth/logout', async (req) => {
    // Only login tokens can be revoked; the guest and the admin API token have nothing to end.
    const claims = req.tokenClaims;
    if (claims && !(await core.tokens.revoke(claims))) {
      // The user has many logged-out tokens still unexpired: end them all with a new pwd_ts instead.
      // The entries kept so far are of tokens the new pwd_ts ends too: kept, the list stayed full and
      // every later logout (for token_expires_in) ended all of the user's tokens again. Exactly these
      // are dropped, after the pwd_ts is written: no revoked token is valid again, not even briefly.
      const ended = await core.store.revokedTokens.idsOf(claims.uid);
      const user = await core.accounts.byId(claims.uid);
      if (user) await core.store.users.update(user.id, { pwd_ts: core.accounts.nextPwdTs(user) });
      core.accounts.forgetCredentials();
      await core.store.revokedTokens.drop(ended);
    }
    return ok();
  });

  const notGuest = async (req: FastifyRequest) => {
    await requireUser(req);
    if (can.isGuest(req.principal!)) throw new ApiError(403, GUEST_2FA);
  };

  app.post('/api/auth/2fa/generate', { preHandler: notGuest }, async (req) => {
    const user = currentUser(req);
    const secret = newTotpSecret();
    const qr = await qrDataUrl(otpauthUrl(user.username, secret));
    // Nothing is stored until /verify proves the authenticator app has the secret.
    return ok({ qr, secret });
  });

  app.post('/api/auth/2fa/verify', { preHandler: notGuest }, async (req) => {
    const body = bodyObject(req);
    const code = reqString(body, 'code');
    const secret = reqString(body, 'secret');
    if (!isTotpSecret(secret) || !checkTotp(secret, code)) throw new ApiError(400, 'Invalid 2FA code');
    await core.store.users.update(currentUser(req).id, { otp_secret: secret });
    core.accounts.forgetCredentials();
    return ok();
  });
};

export default routes;
