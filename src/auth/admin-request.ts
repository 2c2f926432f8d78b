/**
 * `treegate admin set|random` while a server runs: the CLI does not write the store (the server is its
 * one writer, see store/owner.ts); it hashes the new password and hands salt + hash to the server as
 * a request, which this handler applies through Accounts (so tokens and SFTP sessions end too).
 */
import type { RequestHandler } from '../store/json-store.js';
import type { Accounts } from './accounts.js';

export const ADMIN_PASSWORD_OP = 'admin-password';

export function adminRequests(accounts: Accounts, log: { info(msg: string): void }): RequestHandler {
  return async (req) => {
    if (req.op !== ADMIN_PASSWORD_OP) throw new Error(`unknown request ${JSON.stringify(req.op)}`);
    const { salt, pwd_hash } = req;
    if (typeof salt !== 'string' || !salt || typeof pwd_hash !== 'string' || !pwd_hash.startsWith('scrypt$')) {
      throw new Error('malformed admin password request');
    }
    const admin = await accounts.admin();
    if (!admin) throw new Error('no admin user');
    await accounts.setPasswordHash(admin.id, salt, pwd_hash);
    log.info(`admin password changed by treegate admin (user ${admin.username})`);
    return { username: admin.username };
  };
}
