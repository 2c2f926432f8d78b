/**
 * Review of "withdrawn storages let go at once" (StorageLease.onWithdrawn, MountTable.lease,
 * checkedReader, WriteHandle.withdrawn, the copy task's source watch) against the real server:
 * - many SFTP handles open on one storage wait on its withdrawal without Node taking that for a leak;
 * - an idle update handle (no TRUNC: its whole file copied to a spill file at OPEN) on a storage
 *   the admin withdrew gives that copy back at once, as an upload handle gives its put;
 * - a copy from a `.balance` group whose member serving the read is withdrawn (the pinned primary
 *   still serving) is retried from a working member, not failed for good naming the primary.
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { closeHandle, promised as p, readAt, statusCode, uploadLeftovers, withSsh2Sftp, writeAt } from './clients/sftp.js';
import { ok } from './fs-helpers.js';
import { addLocalStorageRow, settle, storageRow, tasksOf, until } from './tasks-helpers.js';
import { createStorage, holdingProxy } from './remote-servers.js';

const { STATUS_CODE } = ssh2.utils.sftp;
let ts: TestServer;
let admin: string;
const roots: string[] = [];
const asAdmin = () => ({ port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD });
const warnings: Error[] = [];
const onWarning = (w: Error) => void warnings.push(w);

beforeAll(async () => {
  process.on('warning', onWarning);
  ts = await startTestServer();
  admin = await ts.login();
});
afterAll(async () => {
  process.off('warning', onWarning);
  await ts?.close();
  await Promise.all(roots.map((r) => rm(r, { recursive: true, force: true })));
});

const rowOf = (mount: string) => storageRow(ts, admin, mount);

const local = (mount: string) => addLocalStorageRow(ts, admin, mount, roots);

const read = readAt;

describe('SFTP handles waiting on a storage\'s withdrawal', () => {
  it('twenty read handles open on one storage (an sshfs mount, a parallel download) raise no "possible memory leak" warning', async () => {
    const { root } = await local('/many-handles');
    const n = 20;
    for (let i = 0; i < n; i++) await writeFile(join(root, `f${i}.txt`), `file ${i}`);
    const leakWarnings = () => warnings.filter((w) => w.name === 'MaxListenersExceededWarning');
    await withSsh2Sftp(asAdmin(), async (s) => {
      const handles: Buffer[] = [];
      for (let i = 0; i < n; i++) handles.push(await p<Buffer>((cb) => s.open(`/many-handles/f${i}.txt`, 'r', cb)));
      for (let i = 0; i < n; i++) expect((await read(s, handles[i]!, 0, 16)).toString()).toBe(`file ${i}`);
      for (const h of handles) await closeHandle(s, h);
    });
    // Node emits process warnings on the next tick.
    await new Promise((r) => setImmediate(r));
    expect(leakWarnings().map((w) => w.message)).toEqual([]);
  });
});

describe('an idle SFTP update handle on a storage the admin withdrew', () => {
  it.each(['delete', 'disable'] as const)('drops its spill file after a %s, before the client closes it; WRITE and CLOSE fail', async (what) => {
    const { root, row } = await local(`/upd-${what}`);
    await writeFile(join(root, 'doc.bin'), randomBytes(256 << 10));
    const spills = async () => (await uploadLeftovers(ts.dataDir)).filter((n) => n.startsWith('sftp-'));
    let wrote: number | undefined;
    let closed: number | undefined;
    await withSsh2Sftp(asAdmin(), async (s) => {
      // r+: READ|WRITE without TRUNC, as sshfs opens a file an editor keeps open.
      const h = await p<Buffer>((cb) => s.open(`${row.mount_path}/doc.bin`, 'r+', cb));
      await writeAt(s, h, 10, 'edited');
      expect(await spills()).toHaveLength(1);
      ok(await ts.api(`/api/admin/storage/${what}?id=${row.id}`, { token: admin, method: 'POST' }));
      await until('the spill file to be gone', async () => ((await spills()).length === 0 ? true : undefined), 10_000, 20);
      wrote = await statusCode((cb) => s.write(h, Buffer.from('more'), 0, 4, 20, cb));
      closed = await statusCode((cb) => s.close(h, cb));
    });
    expect(wrote).toBe(STATUS_CODE.FAILURE);
    expect(closed).toBe(STATUS_CODE.FAILURE);
    expect(await spills()).toEqual([]);
  });
});

describe('a copy task reading from a `.balance` group', () => {
  it('whose serving member is disabled mid-copy (the primary still serving) is retried from the primary and lands whole', async () => {
    // The group: a Local primary at /bc and a WebDav member at /bc.balance1 reading the same files
    // through a proxy that holds each body back after 64 KiB. Ordered first, the member takes the
    // group's first turn.
    const { root: host } = await local('/bc-host');
    const data = randomBytes(1 << 20);
    await writeFile(join(host, 'big.bin'), data);
    const primary = await local('/bc');
    await writeFile(join(primary.root, 'big.bin'), data);
    const proxy = await holdingProxy(ts.url, 64 << 10);
    try {
      ok(await createStorage(ts, admin, '/bc.balance1', 'WebDav', { address: `http://127.0.0.1:${proxy.port}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/bc-host' }, { order: -1 }));
      const member = await rowOf('/bc.balance1');
      const { root: dstRoot } = await local('/bc-dst');
      // Each request is a new turn (the copy request's and its task's): a copy that read from the
      // primary is made again after one more request, so that the task's turn is the member's.
      let copies = 0;
      await until('a copy reading through the member', async () => {
        if (proxy.sent() > 0) return true;
        if (copies > 0) {
          // The last copy either ends (it read from the primary) or is held reading through the
          // member: a busy machine can take longer than one poll to start it, and waiting for it
          // to end then waited on the held body for good.
          const held = await until('the last copy to end or reach the member', async () =>
            proxy.sent() > 0 ? true : (await tasksOf(ts, admin, 'copy', 'undone')).length === 0 ? false : undefined, 30_000, 50);
          if (held) return true;
          ok(await ts.api('/api/fs/get', { token: admin, body: { path: '/bc/big.bin' } }));
        }
        if (copies++ >= 3) throw new Error('no copy read through the .balance member');
        ok(await ts.api('/api/task/copy/clear_done', { token: admin, body: {} }));
        await rm(join(dstRoot, 'big.bin'), { force: true });
        ok(await ts.api('/api/fs/copy', { token: admin, body: { src_dir: '/bc', dst_dir: '/bc-dst', names: ['big.bin'] } }));
        return undefined;
      }, 30_000, 50);
      ok(await ts.api(`/api/admin/storage/disable?id=${member.id}`, { token: admin, method: 'POST' }));
      proxy.release();
      const tasks = await settle(ts, admin, 'copy');
      expect(tasks).toHaveLength(1);
      expect(tasks[0]).toMatchObject({ state: 2, error: '' });
      expect((await readFile(join(dstRoot, 'big.bin'))).equals(data)).toBe(true);
      expect((await readdir(dstRoot)).sort()).toEqual(['big.bin']);
    } finally {
      await proxy.close();
    }
  }, 60_000);
});
