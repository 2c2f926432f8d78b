/**
 * First start on an empty data dir (contract.md): an admin (password from TREEGATE_ADMIN_PASSWORD or
 * a random one printed once), a disabled guest, and a Local storage at `/` rooted at DATA/storage.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Store } from './store/store.js';
import { ADMIN_DEFAULT_PERMISSION, ROLE } from './auth/principal.js';
import { hashPassword, newSalt, randomPassword } from './auth/passwords.js';

export async function firstStart(store: Store, dataDir: string, log: Logger, env: NodeJS.ProcessEnv): Promise<void> {
  const users = await store.users.list();
  if (users.length === 0) {
    const given = env.TREEGATE_ADMIN_PASSWORD;
    const password = given || randomPassword(12);
    const now = Math.floor(Date.now() / 1000);
    // Everything slow (two scrypt hashes, the storage folder) is done before the first record is
    // written: the records then go to the store together (below), because a first start is decided
    // by "no users yet". Written one by one, a stop or crash (systemd restart, power cut) after the
    // admin's write left a store with users but no guest and no storage at `/`, and no later start
    // ever completed it: the server came up serving an empty tree.
    const adminSalt = newSalt();
    const guestSalt = newSalt();
    // One after the other: each scrypt holds 32 MiB while it runs, and the two side by side made the
    // first start the server's highest RSS ever (about 150 MiB, the rest of its life ~100-120).
    const adminHash = await hashPassword(password, adminSalt);
    const guestHash = await hashPassword('guest', guestSalt);
    const root = join(dataDir, 'storage');
    const needStorage = (await store.storages.list()).length === 0;
    if (needStorage) await mkdir(root, { recursive: true, mode: 0o700 });
    // Started together, awaited together: the store puts changes made before its next write into
    // that one atomic write (store/json-store.ts), so a kill leaves all three records or none.
    await Promise.all([
      store.users.insert({
        username: 'admin', salt: adminSalt, pwd_hash: adminHash, pwd_ts: now,
        base_path: '/', role: ROLE.ADMIN, disabled: false, permission: ADMIN_DEFAULT_PERMISSION, sso_id: '', otp_secret: '',
      }),
      store.users.insert({
        username: 'guest', salt: guestSalt, pwd_hash: guestHash, pwd_ts: now,
        base_path: '/', role: ROLE.GUEST, disabled: true, permission: 0, sso_id: '', otp_secret: '',
      }),
      needStorage &&
        store.storages.insert({
          mount_path: '/', order: 0, driver: 'Local', cache_expiration: 0, status: 'work',
          addition: JSON.stringify({ root_folder_path: root }), remark: '', modified: new Date().toISOString(),
          disabled: false, disable_index: false, enable_sign: false, order_by: '', order_direction: '', extract_folder: '',
          web_proxy: false, webdav_policy: 'native_proxy', proxy_range: false, down_proxy_url: '',
        }),
    ]);
    // Printed once, on purpose, at any log.level (a child at info): the operator needs it to log in
    // the first time. Flushed at once: the admin now exists, and a crash within the log's batching
    // delay must not lose the only copy of a random password.
    const notice = log.child({}, { level: 'info' });
    if (given) notice.info('created user admin with the password from TREEGATE_ADMIN_PASSWORD');
    else notice.info(`created user admin; initial password: ${password} (change it with: treegate admin set NEW_PASSWORD)`);
    if (needStorage) log.info({ root }, 'mounted a Local storage at / ');
    log.flush();
  }
}
