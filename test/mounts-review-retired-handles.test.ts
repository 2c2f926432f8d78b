/**
 * Work still holding a storage after the admin deletes, disables or edits it. Requests already being
 * answered finish on the old instance (retire.test.ts); what must not happen is an SFTP handle opened
 * before going on reading or writing the storage after the admin cut it off, an upload landing at
 * CLOSE in the removed storage's folder, or a copy task reporting success into a storage that is gone.
 * Proven with ssh2's SFTP client and REST copy tasks against the real server; the slow copy source is
 * a WebDav storage reading this server's own /dav through a proxy that holds the body back.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { closeHandle, promised as p, readAt, readStatus, statusCode, withSsh2Sftp, writeAt } from './clients/sftp.js';
import { ok, putFile } from './fs-helpers.js';
import { addLocalStorageRow, changeStorage, holdPutsOf, settle, until, type StorageChange, type StorageRow } from './tasks-helpers.js';
import { createStorage, holdingProxy } from './remote-servers.js';
import type { TaskInfo } from '../src/tasks/types.js';

const { STATUS_CODE } = ssh2.utils.sftp;

let ts: TestServer;
let admin: string;
const roots: string[] = [];
const asAdmin = () => ({ port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD });

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
});
afterAll(async () => {
  await ts?.close();
  await Promise.all(roots.map((r) => rm(r, { recursive: true, force: true })));
});

type Row = StorageRow;

/** A fresh Local storage at `mount`: its host root and its row (for update). */
const local = (mount: string) => addLocalStorageRow(ts, admin, mount, roots);

type Change = StorageChange | 'root folder edit';

/** What the admin does to the storage `row` over REST; the host folder of a new root for the root folder edit. */
async function change(what: Change, row: Row): Promise<void> {
  if (what !== 'root folder edit') return changeStorage(ts, admin, what, row);
  const other = (await local(`${row.mount_path}-other`)).root;
  ok(await ts.api('/api/admin/storage/update', { token: admin, body: { ...row, addition: JSON.stringify({ root_folder_path: other }) } }));
}

const read = readAt;
/** Files in a host folder, the Local driver's upload temp files included. */
const hostNames = async (root: string) => (await readdir(root)).sort();

const CUT_OFF: Change[] = ['delete', 'disable', 'root folder edit', 'mount path edit'];

describe('an SFTP read handle opened before the admin changes its storage', () => {
  it.each(CUT_OFF)('a READ sent after a %s is refused with FAILURE', async (what) => {
    const mount = `/rd-${what.replace(/ /g, '-')}`;
    const { root, row } = await local(mount);
    await writeFile(join(root, 'f.txt'), 'secret bytes');
    await withSsh2Sftp(asAdmin(), async (s) => {
      const h = await p<Buffer>((cb) => s.open(`${mount}/f.txt`, 'r', cb));
      expect((await read(s, h, 0, 6)).toString()).toBe('secret');
      await change(what, row);
      expect(await readStatus(s, h, 6)).toBe(STATUS_CODE.FAILURE);
      await closeHandle(s, h);
    });
  });

  it('an edit of its remark (same place, same options) leaves the handle reading', async () => {
    const { root, row } = await local('/rd-remark');
    await writeFile(join(root, 'f.txt'), 'kept bytes');
    await withSsh2Sftp(asAdmin(), async (s) => {
      const h = await p<Buffer>((cb) => s.open('/rd-remark/f.txt', 'r', cb));
      expect((await read(s, h, 0, 4)).toString()).toBe('kept');
      await change('remark edit', row);
      expect((await read(s, h, 4, 6)).toString()).toBe(' bytes');
      await closeHandle(s, h);
    });
  });
});

describe('an SFTP upload handle opened before the admin changes its storage', () => {
  it.each(CUT_OFF)('after a %s: a WRITE is refused, CLOSE fails, nothing lands in the old folder', async (what) => {
    const mount = `/wr-${what.replace(/ /g, '-')}`;
    const { root, row } = await local(mount);
    let wrote: number | undefined;
    let closed: number | undefined;
    await withSsh2Sftp(asAdmin(), async (s) => {
      const h = await p<Buffer>((cb) => s.open(`${mount}/up.txt`, 'w', cb));
      await writeAt(s, h, 0, 'first ');
      await change(what, row);
      wrote = await statusCode((cb) => s.write(h, Buffer.from('second'), 0, 6, 6, cb));
      closed = await statusCode((cb) => s.close(h, cb));
    });
    expect(wrote).toBe(STATUS_CODE.FAILURE);
    expect(closed).toBe(STATUS_CODE.FAILURE);
    expect(await hostNames(root)).toEqual([]); // neither the file nor the driver's temp file
  });

  it.each(['delete', 'disable'] as const)('a CLOSE (no WRITE after) following a %s fails and lands nothing', async (what) => {
    const mount = `/cl-${what}`;
    const { root, row } = await local(mount);
    let closed: number | undefined;
    await withSsh2Sftp(asAdmin(), async (s) => {
      const h = await p<Buffer>((cb) => s.open(`${mount}/up.txt`, 'w', cb));
      await writeAt(s, h, 0, 'all of it');
      await change(what, row);
      closed = await statusCode((cb) => s.close(h, cb));
    });
    expect(closed).toBe(STATUS_CODE.FAILURE);
    expect(await hostNames(root)).toEqual([]);
  });

  it('an edit of its remark leaves the upload going: it lands whole at CLOSE', async () => {
    const { root, row } = await local('/wr-remark');
    await withSsh2Sftp(asAdmin(), async (s) => {
      const h = await p<Buffer>((cb) => s.open('/wr-remark/up.txt', 'w', cb));
      await writeAt(s, h, 0, 'first ');
      await change('remark edit', row);
      await writeAt(s, h, 6, 'second');
      await closeHandle(s, h);
    });
    expect(await readFile(join(root, 'up.txt'), 'utf8')).toBe('first second');
  });
});

describe('a copy task whose destination storage is deleted while its bytes move', () => {
  it('fails naming the storage; the file is not reported copied', async () => {
    const { root: srcRoot } = await local('/csrc');
    const data = randomBytes(1 << 20);
    await writeFile(join(srcRoot, 'big.bin'), data);
    const proxy = await holdingProxy(ts.url, 64 << 10);
    try {
      ok(await createStorage(ts, admin, '/cdav', 'WebDav', { address: `http://127.0.0.1:${proxy.port}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/csrc' }));
      const { root: dstRoot, row } = await local('/cdst');
      ok(await ts.api('/api/fs/copy', { token: admin, body: { src_dir: '/cdav', dst_dir: '/cdst', names: ['big.bin'] } }));
      // The put's temp file is in the destination folder once the first bytes went through.
      await until('the copy to be under way', async () => (proxy.sent() > 0 && (await readdir(dstRoot)).length > 0 ? true : undefined), 30_000, 10);
      await change('delete', row);
      proxy.release();
      const [task] = (await settle(ts, admin, 'copy')) as TaskInfo[];
      expect(task!.state).toBe(7); // failed, not succeeded
      expect(task!.error).toContain('[/cdst]');
      expect(await hostNames(dstRoot)).toEqual([]);
    } finally {
      await proxy.close();
    }
  }, 60_000);
});

describe('an As-Task upload whose storage is deleted after the task checked it, before its put resolves the path', () => {
  it('fails naming the storage instead of landing in the root storage', async () => {
    const { row } = await local('/utask');
    // The worker has checked its pin and calls the put; the put waits here until the storage is gone.
    const hold = holdPutsOf(ts, '/utask/x.txt');
    try {
      const r = (await putFile(ts, admin, '/utask/x.txt', 'body', { 'as-task': 'true' })) as { code: number; message: string; data: { task: TaskInfo } };
      ok(r);
      await until('the put to be called', async () => (hold.held() ? true : undefined), 10_000, 5);
      await change('delete', row);
      hold.release();
      const all = await settle(ts, admin, 'upload');
      expect(all.find((t) => t.id === r.data.task.id)).toMatchObject({ state: 7, error: 'destination storage [/utask] was deleted or changed' });
      expect(existsSync(join(ts.dataDir, 'storage', 'utask'))).toBe(false);
    } finally {
      hold.restore();
    }
  });
});
