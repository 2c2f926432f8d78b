/**
 * Follow-up review, against the real server on loopback: a task that failed left nothing in the log
 * (an admin's never; a user's once per attempt, with a stack); a WebDAV MOVE of an Alias's top-level
 * name (which REST and SFTP refuse) removed the existing destination before the driver refused, or,
 * into another storage, copied the folder's contents out and emptied it before answering 405.
 */
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { ok, putFile } from './fs-helpers.js';
import { addLocalStorage, holdPutsOf, settle, until } from './tasks-helpers.js';
import { startFileServer, type FileServer } from './offline-helpers.js';
import { promised, withSsh2Sftp } from './clients/sftp.js';
import type { TaskInfo } from '../src/tasks/types.js';

const STATUS = ssh2.utils.sftp.STATUS_CODE;
const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

let ts: TestServer;
let admin: string;
let la: string;
let lb: string;
let web: FileServer;

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
  la = await addLocalStorage(ts, admin, '/la');
  lb = await addLocalStorage(ts, admin, '/lb');
  web = await startFileServer({});
}, 30_000);
afterAll(async () => {
  await web?.close();
  await ts?.close();
  await Promise.all([la, lb].filter(Boolean).map((d) => rm(d, { recursive: true, force: true })));
});

type Line = { level: number; msg: string; task?: string; error?: string; id?: string; err?: unknown };
const failedLines = (from: number, id: string): Line[] =>
  ts.logs.slice(from).map((l) => JSON.parse(l) as Line).filter((l) => l.msg === 'task failed' && l.id === id);

describe('task failures in the log', () => {
  it('an admin\'s failed offline download is logged once at warn, with its name and error, without the URL\'s secrets', async () => {
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'offline_download_allow_private', value: 'true' }] }));
    const from = ts.logs.length;
    const url = `${web.url.replace('http://', 'http://dl-user:pw-s3cret@')}/e404?sig=tok-s3cret`;
    const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
      token: admin, body: { urls: [url], path: '/la', tool: 'SimpleHttp', delete_policy: 'delete_always' },
    });
    ok(r);
    const id = r.data!.tasks[0]!.id;
    const done = await settle(ts, admin, 'offline_download');
    const t = done.find((x) => x.id === id)!;
    expect(t.state).toBe(7); // failed, after its retry
    await until('the failure logged', async () => (failedLines(from, id).length ? true : undefined), 5_000, 50);
    const lines = failedLines(from, id);
    expect(lines).toHaveLength(1); // once, not once per attempt
    expect(lines[0]).toMatchObject({ level: 40, error: t.error });
    expect(lines[0]!.task).toContain(`${web.url}/e404`);
    expect(lines[0]!.err).toBeUndefined(); // no stack for an expected failure
    expect(ts.logs.slice(from).join('\n')).not.toContain('s3cret');
  }, 30_000);

  it('a cancelled task is not logged as a failure', async () => {
    const hold = holdPutsOf(ts, '/la/held.txt');
    try {
      const from = ts.logs.length;
      const r = (await putFile(ts, admin, '/la/held.txt', 'x', { 'as-task': 'true' })) as { data: { task: TaskInfo } };
      const id = r.data.task.id;
      await until('the upload to hold', async () => (hold.held() ? true : undefined), 10_000, 5);
      ok(await ts.api(`/api/task/upload/cancel?tid=${id}`, { token: admin, body: {} }));
      hold.release();
      expect((await settle(ts, admin, 'upload')).find((x) => x.id === id)).toMatchObject({ state: 4 });
      expect(failedLines(from, id)).toEqual([]);
    } finally {
      hold.restore();
    }
  });
});

describe('moving a top-level name of an Alias with several targets (it stands for the target folder)', () => {
  const dav = async (path: string, dst: string) => {
    const r = await fetch(`${ts.url}/dav${path}`, { method: 'MOVE', headers: { authorization: basic, destination: `${ts.url}/dav${dst}` } });
    await r.arrayBuffer();
    return r.status;
  };
  const sftpCode = (op: (sftp: import('ssh2').SFTPWrapper, cb: (e?: Error | null) => void) => void) =>
    withSsh2Sftp({ port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
      promised<number | undefined>((cb) => op(sftp, (e) => cb(null, e ? (e as { code?: number }).code : undefined))));

  beforeAll(async () => {
    await mkdir(join(la, 'docs'), { recursive: true });
    await writeFile(join(la, 'docs', 'keep.txt'), 'kept');
    await mkdir(join(lb, 'pics', 'old'), { recursive: true });
    await writeFile(join(lb, 'pics', 'old', 'precious.txt'), 'precious');
    ok(await ts.api('/api/admin/storage/create', {
      token: admin, body: { mount_path: '/aw', driver: 'Alias', addition: JSON.stringify({ paths: 'docs:/la/docs\npics:/lb/pics', writable: true }) },
    }));
  });

  it('WebDAV MOVE onto an existing folder is refused before the destination is removed, as REST and SFTP refuse it', async () => {
    expect(await dav('/aw/docs', '/aw/pics/old')).toBe(405); // Overwrite: T by default
    expect(await readFile(join(lb, 'pics', 'old', 'precious.txt'), 'utf8')).toBe('precious');
    expect(await ts.api('/api/fs/move', { token: admin, body: { src_dir: '/aw', dst_dir: '/aw/pics', names: ['docs'], overwrite: true } }))
      .toEqual({ code: 500, message: 'an alias target itself cannot be changed', data: null });
    expect(await sftpCode((sftp, cb) => sftp.rename('/aw/docs', '/aw/pics/docs', cb))).toBe(STATUS.OP_UNSUPPORTED);
    expect(await readdir(join(lb, 'pics', 'old'))).toEqual(['precious.txt']);
    expect(await readdir(join(la, 'docs'))).toEqual(['keep.txt']);
  });

  it('WebDAV MOVE into another storage is refused before its contents are copied out and removed', async () => {
    expect(await dav('/aw/docs', '/lb/docs-moved')).toBe(405);
    expect(await readdir(lb)).not.toContain('docs-moved');
    expect(await readdir(join(la, 'docs'))).toEqual(['keep.txt']);
  });
});
