/**
 * A storage edited over REST while a WebDAV upload into it streams. The storage is an SFTP one
 * (against this server's own SFTP listener, onto a Local storage), so its driver's drop() closes
 * the SSH connection the upload goes through: the upload must finish on the old instance, which
 * is dropped only after.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { ok } from './fs-helpers.js';
import { addLocalStorage, until } from './tasks-helpers.js';
import { openDavPut } from './clients/webdav.js';

let ts: TestServer;
let admin: string;
let backRoot: string;
let remote: Record<string, unknown>;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
  backRoot = await addLocalStorage(ts, admin, '/back');
  const addition = { address: `127.0.0.1:${ts.sftpPort}`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/back' };
  const r = await ts.api<{ id: number }>('/api/admin/storage/create', {
    token: admin, body: { mount_path: '/remote', driver: 'SFTP', addition: JSON.stringify(addition), cache_expiration: 0 },
  });
  ok(r);
  const got = await ts.api<Record<string, unknown>>(`/api/admin/storage/get?id=${r.data!.id}`, { token: admin });
  ok(got);
  expect(got.data!.status).toBe('work');
  remote = got.data!;
});
afterAll(async () => ts?.close());

describe('editing a storage during a WebDAV upload', () => {
  it('the upload completes and lands whole; the old instance is dropped after it', async () => {
    const data = randomBytes(8 << 20);
    const first = 1 << 20;
    const { req, status } = openDavPut(ts.url, '/dav/remote/big.bin', data.length, 'admin', ADMIN_PASSWORD);
    req.write(data.subarray(0, first));
    // The SFTP upload's temp file appears in the Local storage behind it: the transfer is under way.
    await until('the upload to reach the back storage', async () => ((await readdir(backRoot)).length > 0 ? true : undefined), 30_000, 10);
    ok(await ts.api('/api/admin/storage/update', { token: admin, body: { ...remote, remark: 'edited mid-upload' } }));
    req.end(data.subarray(first));
    expect(await status).toBe(201);
    expect(sha(await readFile(join(backRoot, 'big.bin')))).toBe(sha(data));
    // Log lines are written in batches (src/log.ts): wait for both.
    const logged = (text: string) => ts.logs.findIndex((l) => l.includes(text));
    await until('the old instance to be dropped', async () => (logged('drained old instance dropped') >= 0 ? true : undefined), 30_000, 10);
    expect(logged('old instance drains its operations')).toBeGreaterThanOrEqual(0);
    expect(logged('old instance drains its operations')).toBeLessThan(logged('drained old instance dropped'));
  });
});
