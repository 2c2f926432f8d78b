/**
 * Live WebDAV locks are bounded per user (protocols/webdav/locks.ts MAX_LOCKS_PER_USER): each is a
 * store record rewritten with the store on every LOCK. Past the bound a LOCK is 507, and a LOCK of a
 * new name creates no empty file first; an UNLOCK frees a place. The locks are put in the store
 * before the server starts (as a restart finds them), so the test needs no thousand LOCKs.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { LOCKS_NS, MAX_LOCKS_PER_USER, type LockInfo } from '../protocols/webdav/locks.js';
import { JsonStore } from '../src/store/json-store.js';
import { davClient } from './clients/webdav.js';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';

const ENV = { TREEGATE_SFTP_ENABLE: 'false' };
const lockinfo = '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>me</D:owner></D:lockinfo>';
let s: TestServer | undefined;
let dataDir: string | undefined;

afterAll(async () => {
  await s?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

it('a LOCK past the per-user bound is 507 and leaves no file behind; an UNLOCK frees a place', async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'treegate-lock-bound-'));
  await (await startTestServer({ dataDir, env: ENV })).close(); // first start: admin, store
  const store = await JsonStore.open(join(dataDir, 'store.json'), { owner: true });
  const admin = (await store.users.findBy('username', 'admin'))[0]!;
  const held: LockInfo[] = Array.from({ length: MAX_LOCKS_PER_USER }, (_, i) => ({
    token: `opaquelocktoken:bound-${i}`, root: `/held-${i}`, depth: '0', scope: 'exclusive', owner: '', userId: admin.id, timeout: 3600, expires: Date.now() + 3_600_000,
  }));
  await Promise.all(held.map((l) => store.kv.set(LOCKS_NS, l.token, l))); // one coalesced write
  await store.close();
  await writeFile(join(dataDir, 'storage', 'held-0'), 'x'); // UNLOCK wants the resource there

  s = await startTestServer({ dataDir, env: ENV });
  const dav = davClient(s.url, 'admin', ADMIN_PASSWORD);
  const lock = () => dav('LOCK', '/new-name.txt', { body: lockinfo, headers: { Timeout: 'Second-600', Depth: '0' } });
  expect((await lock()).status).toBe(507);
  expect(existsSync(join(dataDir, 'storage', 'new-name.txt'))).toBe(false);
  expect((await dav('UNLOCK', '/held-0', { headers: { 'Lock-Token': `<${held[0]!.token}>` } })).status).toBe(204);
  expect((await lock()).status).toBe(201);
  expect(existsSync(join(dataDir, 'storage', 'new-name.txt'))).toBe(true);
});
