/**
 * Code review of logging, each finding proven against a real server on loopback with its log
 * captured: an SFTP request that failed in the storage backend (UPSTREAM) answered the client a fixed
 * "storage backend error" and logged nothing, so the admin never learned why (REST and WebDAV log it);
 * each WebDAV request into a disabled storage logged an error with a stack trace; and an aria2 or
 * qBittorrent address that is not a valid URL put its password into the error log on every offline
 * download (fetch quotes the text in its message, Node's URL error keeps it as `input`).
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ssh2 from 'ssh2';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { withSsh2Sftp } from './clients/sftp.js';
import { createStorage } from './remote-servers.js';

const STATUS = ssh2.utils.sftp.STATUS_CODE;

let s: TestServer;
let token: string;

beforeAll(async () => {
  s = await startTestServer();
  token = await s.login();
}, 60_000);

afterAll(async () => {
  await s?.close();
});

describe('an SFTP request failing in the storage backend', () => {
  it('logs the backend failure the client is not told about', async () => {
    const b = await startRestServer();
    ok(await putFile(b, await b.login(), '/onB.txt', 'b'));
    ok(await createStorage(s, token, '/lr-wd', 'WebDav', { address: `${b.url}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/' }));
    await b.close(); // the remote is down now: every call is an UPSTREAM failure (ECONNREFUSED)
    const before = s.logs.length;
    const err = await withSsh2Sftp({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
      new Promise<{ code?: number; message?: string }>((res) =>
        sftp.opendir('/lr-wd', (e, h) => (e ? res(e as never) : sftp.readdir(h, (e2) => res((e2 ?? {}) as never))))));
    expect(err.code).toBe(STATUS.FAILURE);
    expect(err.message).toBe('storage backend error');
    // The client gets a fixed text (errors.ts: "backend details stay in the log"): the detail must be there.
    const lines = s.logs.slice(before).map((l) => JSON.parse(l) as { level: number; err?: { message?: string } });
    expect(lines.some((l) => l.level >= 50 && /ECONNREFUSED/.test(l.err?.message ?? ''))).toBe(true);
  }, 60_000);
});

describe('WebDAV requests into a storage the admin disabled', () => {
  it('are no error in the log: the admin chose it, and any client could fill the log with them', async () => {
    await mkdir(join(s.dataDir, 'storage', 'lr-off'));
    const r = await createStorage(s, token, '/lr-off', 'Local', { root_folder_path: join(s.dataDir, 'storage', 'lr-off') });
    ok(r);
    ok(await s.api(`/api/admin/storage/disable?id=${r.data!.id}`, { token, method: 'POST' }));
    const before = s.logs.length;
    const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${s.url}/dav/lr-off/`, { method: 'PROPFIND', headers: { authorization: basic, depth: '1' } });
      await res.arrayBuffer();
      expect(res.status).toBe(502);
    }
    const lines = s.logs.slice(before).map((l) => JSON.parse(l) as { level: number; msg: string });
    expect(lines.filter((l) => l.msg === 'webdav')).toHaveLength(3); // the access lines are there
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
  }, 60_000);
});

describe('an offline tool address that is not a valid URL, with credentials in it', () => {
  it('keeps its password out of the log and out of the answers', async () => {
    const before = s.logs.length;
    const aria = await s.api('/api/admin/setting/set_aria2', { token, body: { uri: 'http://aru:ARIA-PW-1@[nas/jsonrpc', secret: 's' } });
    const qbit = await s.api('/api/admin/setting/set_qbit', { token, body: { url: 'http://qbu:QBIT-PW-2@[nas/', seedtime: '0' } });
    expect(aria.code).toBe(500);
    expect(qbit.code).toBe(500);
    const answers = [aria.message, qbit.message];
    for (const tool of ['aria2', 'qBittorrent']) {
      const r = await s.api('/api/fs/add_offline_download', { token, body: { urls: ['http://example.com/f'], path: '/', tool, delete_policy: 'delete_on_upload_succeed' } });
      expect(r.code).toBe(500);
      answers.push(r.message);
    }
    const lines = s.logs.slice(before);
    expect(lines.some((l) => l.includes('failed init tool'))).toBe(true); // the failures are logged
    expect(lines.filter((l) => /ARIA-PW-1|QBIT-PW-2/.test(l))).toEqual([]);
    expect(answers.filter((m) => /ARIA-PW-1|QBIT-PW-2/.test(m))).toEqual([]);
  }, 60_000);
});
