/**
 * Two admin edits of one user at once: one sets a password (a slow hash), the other, sent just after
 * and done long before that hash, changes the permission. The password edit is built on the record
 * as it is after its hash, so the permission change is kept. Built on the record read before the hash,
 * it wrote the old permission back (and, the same way, a pwd_ts no newer than a password change made
 * meanwhile, leaving that change's tokens valid).
 */
import { expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { createUser, serveForFile } from './auth-helpers.js';

let s: TestServer;
let admin: string;
serveForFile([], (server, token) => ((s = server), (admin = token)));

const post = (path: string, body: unknown) => s.api(path, { token: admin, method: 'POST', body });

it('a permission change made while a password edit hashes is not written back over', async () => {
  const id = await createUser(s, admin, { username: 'rita', password: 'rita-pass-1', base_path: '/', permission: 1 });
  const withPassword = post('/api/admin/user/update', { id, username: 'rita', password: 'rita-pass-2', base_path: '/' });
  await new Promise((r) => setTimeout(r, 5)); // the first edit is in its hash
  expect(await post('/api/admin/user/update', { id, username: 'rita', password: '', base_path: '/', permission: 8 })).toMatchObject({ code: 200 });
  expect(await withPassword).toMatchObject({ code: 200 });
  const r = await s.api<{ permission: number }>(`/api/admin/user/get?id=${id}`, { token: admin });
  expect(r.data!.permission).toBe(8);
  expect(await s.login('rita', 'rita-pass-2')).toBeTruthy();
});
