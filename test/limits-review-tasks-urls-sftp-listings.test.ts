/**
 * Review of what a client can make grow without bound (growth-limits-review): each test counts
 * entries through the API (or files under DATA) against a real server on loopback.
 */
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import type { SFTPWrapper } from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { expectCode, makeUser, ok, PERM } from './fs-helpers.js';
import { MAX_DIR_ENTRIES_PER_USER } from '../protocols/sftp/handles.js';
import { MAX_URL_CHARS } from '../src/tasks/offline/offline.js';
import { MAX_UNDONE_PER_USER } from '../src/tasks/retention.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
/** An HTTP server that takes connections and never answers: downloads from it stay running. */
let hang: Server;
const held = new Set<Socket>();

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
  hang = createServer(() => undefined);
  hang.on('connection', (s) => {
    held.add(s);
    s.on('close', () => held.delete(s));
  });
  await new Promise<void>((r) => hang.listen(0, '127.0.0.1', r));
});
afterAll(async () => {
  await ts?.close();
  for (const s of held) s.destroy();
  hang?.close();
});

it("a user's unfinished tasks are bounded: downloads that never end do not pile up without end, nor As-Task uploads", async () => {
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'offline_download_allow_private', value: 'true' }] }));
  const user = await makeUser(ts, admin, 'downloader', 4 | PERM.WRITE); // bit 2: offline downloads
  const port = (hang.address() as { port: number }).port;
  let next = 0;
  const add = (n: number) =>
    ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
      token: user,
      body: { tool: 'SimpleHttp', delete_policy: 'delete_on_upload_succeed', path: '/dl', urls: Array.from({ length: n }, () => `http://127.0.0.1:${port}/${next++}`) },
    });
  const undone = async () => (await ts.api<TaskInfo[]>('/api/task/offline_download/undone', { token: user })).data!.length;

  const first = await add(MAX_UNDONE_PER_USER - 1);
  ok(first);
  expect(first.data!.tasks).toHaveLength(MAX_UNDONE_PER_USER - 1);
  // Past the bound the whole request is refused, none of it made.
  expectCode(await add(2), 400, `at most ${MAX_UNDONE_PER_USER} unfinished tasks per user: wait for some to finish, or cancel some`);
  expect(await undone()).toBe(MAX_UNDONE_PER_USER - 1);
  ok(await add(1));
  expect(await undone()).toBe(MAX_UNDONE_PER_USER);
  expect((await add(1)).code).toBe(400);

  // An As-Task upload counts too, and is refused before its body is spooled to DATA/temp.
  const put = await fetch(`${ts.url}/api/fs/put`, {
    method: 'PUT',
    headers: { authorization: user, 'file-path': encodeURIComponent('/up.bin'), 'as-task': 'true', 'content-type': 'application/octet-stream' },
    body: Buffer.alloc(1000, 1),
  });
  expectCode((await put.json()) as { code: number; message: string }, 400, `at most ${MAX_UNDONE_PER_USER} unfinished tasks per user: wait for some to finish, or cancel some`);
  expect(await readdir(join(ts.dataDir, 'temp', 'upload')).catch(() => [])).toEqual([]);
  expect((await ts.api<TaskInfo[]>('/api/task/upload/undone', { token: user })).data).toEqual([]);

  // Cancelling (queued ones) frees places; the admin is not bounded.
  ok(await ts.api('/api/task/offline_download/cancel_some', { token: user, body: first.data!.tasks.slice(-3).map((t) => t.id) }));
  ok(await add(3));
  expect((await add(1)).code).toBe(400);
  ok(await ts.api('/api/fs/add_offline_download', { token: admin, body: { tool: 'SimpleHttp', delete_policy: 'delete_on_upload_succeed', path: '/dl', urls: [`http://127.0.0.1:${port}/admin`] } }));
}, 120_000);

it('a download URL is bounded in length: each is kept twice in its task record, for as long as the task is listed', async () => {
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'offline_download_allow_private', value: 'true' }] }));
  const user = await makeUser(ts, admin, 'longurls', 4 | PERM.WRITE);
  const port = (hang.address() as { port: number }).port;
  const add = (path: string) =>
    ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', { token: user, body: { tool: 'SimpleHttp', delete_policy: 'delete_never', path: '/dl', urls: [`http://127.0.0.1:${port}/${path}`] } });
  const prefix = `http://127.0.0.1:${port}/`.length;
  expectCode(await add('x'.repeat(900_000)), 400, `url too long: at most ${MAX_URL_CHARS} characters`);
  expect((await ts.api<TaskInfo[]>('/api/task/offline_download/undone', { token: user })).data).toEqual([]);
  ok(await add('y'.repeat(MAX_URL_CHARS - prefix))); // a long magnet link or signed URL still fits
});

describe('SFTP', () => {
  const U = { username: 'lister', password: 'lister-pass-123' };
  const connect = async () => {
    const c = new ssh2.Client();
    await new Promise<void>((resolve, reject) => {
      c.on('ready', () => resolve()).on('error', reject);
      c.connect({ host: '127.0.0.1', port: ts.sftpPort, username: U.username, password: U.password, readyTimeout: 20_000 });
    });
    const sftp = await new Promise<SFTPWrapper>((r, j) => c.sftp((e, x) => (e ? j(e) : r(x))));
    return { c, sftp };
  };
  const opendir = (sftp: SFTPWrapper, p: string) => new Promise<Buffer | Error>((r) => sftp.opendir(p, (e, h) => r(e ?? h)));

  it("the listings one user's dir handles hold are bounded, not 1,024 copies of a big folder (4 GB of heap)", async () => {
    ok(await ts.api('/api/admin/user/create', { token: admin, body: { ...U, permission: PERM.SFTP_READ, base_path: '/', role: 0 } }));
    const many = 20_000;
    const dir = join(ts.dataDir, 'storage', 'many');
    await mkdir(dir);
    for (let i = 0; i < many; i += 1000) await Promise.all(Array.from({ length: 1000 }, (_, j) => writeFile(join(dir, `f${i + j}`), '')));
    const fits = MAX_DIR_ENTRIES_PER_USER / many;
    const one = await connect();
    try {
      const handles: Buffer[] = [];
      for (let i = 0; i < fits; i++) {
        const h = await opendir(one.sftp, '/many');
        expect(h).toBeInstanceOf(Buffer);
        handles.push(h as Buffer);
      }
      const refused = await opendir(one.sftp, '/many');
      expect(refused).toBeInstanceOf(Error);
      expect((refused as Error).message).toMatch(/too many listed entries held open/);
      // Per user, over every connection; a CLOSE gives the room back.
      const two = await connect();
      expect(await opendir(two.sftp, '/many')).toBeInstanceOf(Error);
      await new Promise<void>((r) => one.sftp.close(handles.pop()!, () => r()));
      expect(await opendir(two.sftp, '/many')).toBeInstanceOf(Buffer);
      two.c.end();
    } finally {
      one.c.end();
    }
    // Connections that end give back what their handles held.
    const three = await connect();
    try {
      // The server learns of the ends asynchronously: wait (bounded) for the first to pass.
      let first = await opendir(three.sftp, '/many');
      for (let i = 0; i < 100 && !(first instanceof Buffer); i++) first = await new Promise((r) => setTimeout(r, 50)).then(() => opendir(three.sftp, '/many'));
      expect(first).toBeInstanceOf(Buffer);
      for (let i = 0; i < 2; i++) expect(await opendir(three.sftp, '/many')).toBeInstanceOf(Buffer);
    } finally {
      three.c.end();
    }
  }, 120_000);
});
