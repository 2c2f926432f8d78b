/**
 * A storage the admin deletes or disables (withdraws) while work kept open on it waits:
 * - an idle SFTP handle lets go of the old instance at once (its descriptor on a Local file, a
 *   Local upload's temp file, a remote storage's connections), not at the client's next request;
 * - a read handle opened through an Alias stops when the Alias's target storage is withdrawn;
 * - a copy task whose source storage is withdrawn mid-copy fails naming it and lands nothing.
 * Proven with ssh2's SFTP client and REST copy tasks against the real server; the remote storage
 * is a WebDav one reading this server's own /dav through a proxy that holds the body back.
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { closeHandle, promised as p, readAt, readStatus, statusCode, withSsh2Sftp, writeAt } from './clients/sftp.js';
import { ok } from './fs-helpers.js';
import { addLocalStorageRow, changeStorage, settle, storageRow, until, type StorageChange, type StorageRow } from './tasks-helpers.js';
import { createStorage, holdingProxy } from './remote-servers.js';
import { fdsOn } from './open-fds.js';

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
const rowOf = (mount: string) => storageRow(ts, admin, mount);

/** A fresh Local storage at `mount`: its host root and its row. */
const local = (mount: string) => addLocalStorageRow(ts, admin, mount, roots);

const change = (what: StorageChange, row: Row) => changeStorage(ts, admin, what, row);

const read = readAt;
/** Bounded wait for a state the server reaches on its own (no request on the handle meanwhile). */
const soon = (what: string, cond: () => boolean | Promise<boolean>) => until(what, async () => ((await cond()) ? true : undefined), 10_000, 20);

describe('an idle SFTP handle on a storage the admin withdrew lets go of the old instance at once', () => {
  it.each(['delete', 'disable'] as const)('a read handle on a Local file closes its descriptor after a %s, before any further request', async (what) => {
    const { root, row } = await local(`/idle-rd-${what}`);
    const file = join(root, 'f.txt');
    await writeFile(file, 'secret bytes');
    await withSsh2Sftp(asAdmin(), async (s) => {
      const h = await p<Buffer>((cb) => s.open(`${row.mount_path}/f.txt`, 'r', cb));
      expect((await read(s, h, 0, 6)).toString()).toBe('secret');
      expect(fdsOn(file)).toBe(1);
      await change(what, row);
      await soon('the descriptor to be closed', () => fdsOn(file) === 0);
      // The handle is still the client's: its requests get the clean refusals.
      expect(await readStatus(s, h, 6)).toBe(STATUS_CODE.FAILURE);
      await closeHandle(s, h);
    });
  });

  it('a read handle kept across a remark edit (it reads on) closes its descriptor at a later delete', async () => {
    const { root, row } = await local('/idle-rd-twice');
    const file = join(root, 'f.txt');
    await writeFile(file, 'secret bytes');
    await withSsh2Sftp(asAdmin(), async (s) => {
      const h = await p<Buffer>((cb) => s.open('/idle-rd-twice/f.txt', 'r', cb));
      await change('remark edit', row);
      expect((await read(s, h, 0, 6)).toString()).toBe('secret');
      // The instance the handle reads is retired (replaced, still serving) and holds nothing.
      await change('delete', await rowOf('/idle-rd-twice'));
      await soon('the descriptor to be closed', () => fdsOn(file) === 0);
      expect(await readStatus(s, h, 6)).toBe(STATUS_CODE.FAILURE);
      await closeHandle(s, h);
    });
  });

  it.each(['delete', 'disable'] as const)('an upload handle drops the driver\'s temp file after a %s; WRITE and CLOSE fail; nothing lands', async (what) => {
    const { root, row } = await local(`/idle-wr-${what}`);
    let wrote: number | undefined;
    let closed: number | undefined;
    await withSsh2Sftp(asAdmin(), async (s) => {
      const h = await p<Buffer>((cb) => s.open(`${row.mount_path}/up.txt`, 'w', cb));
      // Past Local's small-body buffer (64 KiB): the driver streams into a temp file in the folder.
      for (let off = 0; off < 96 << 10; off += 32 << 10) await writeAt(s, h, off, Buffer.alloc(32 << 10, 1));
      await soon('the driver\'s temp file', async () => (await readdir(root)).length === 1);
      await change(what, row);
      await soon('the temp file to be gone', async () => (await readdir(root)).length === 0);
      wrote = await statusCode((cb) => s.write(h, Buffer.from('second'), 0, 6, 96 << 10, cb));
      closed = await statusCode((cb) => s.close(h, cb));
    });
    expect(wrote).toBe(STATUS_CODE.FAILURE);
    expect(closed).toBe(STATUS_CODE.FAILURE);
    expect(await readdir(root)).toEqual([]);
  });

  it('a read handle on a WebDav storage lets its connections go after a delete: the old driver is dropped', async () => {
    const { root } = await local('/idle-wsrc');
    await writeFile(join(root, 'big.bin'), randomBytes(256 << 10));
    // Sends 64 KiB of each GET, holds the rest: the handle's stream stays open as long as it is kept.
    const proxy = await holdingProxy(ts.url, 64 << 10);
    try {
      ok(await createStorage(ts, admin, '/idle-wdav', 'WebDav', { address: `http://127.0.0.1:${proxy.port}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/idle-wsrc' }));
      const row = await rowOf('/idle-wdav');
      await withSsh2Sftp(asAdmin(), async (s) => {
        const h = await p<Buffer>((cb) => s.open('/idle-wdav/big.bin', 'r', cb));
        expect((await read(s, h, 0, 4096)).length).toBe(4096);
        expect(proxy.connections()).toBeGreaterThan(0);
        await change('delete', row);
        await soon('the WebDav storage\'s connections to close', () => proxy.connections() === 0);
        expect(await readStatus(s, h, 4096)).toBe(STATUS_CODE.FAILURE);
        await closeHandle(s, h);
      });
    } finally {
      await proxy.close();
    }
  });
});

describe('an SFTP read handle opened through an Alias', () => {
  /** A Local storage with f.txt and an Alias of it. */
  async function aliased(name: string): Promise<{ root: string; row: Row; alias: string }> {
    const { root, row } = await local(`/al-${name}-t`);
    await writeFile(join(root, 'f.txt'), 'target bytes');
    const alias = `/al-${name}`;
    ok(await createStorage(ts, admin, alias, 'Alias', { paths: row.mount_path }));
    return { root, row, alias };
  }

  it.each(['delete', 'disable'] as const)('is refused once the target storage is %sd, and closes its descriptor', async (what) => {
    const { root, row, alias } = await aliased(what);
    await withSsh2Sftp(asAdmin(), async (s) => {
      const h = await p<Buffer>((cb) => s.open(`${alias}/f.txt`, 'r', cb));
      expect((await read(s, h, 0, 6)).toString()).toBe('target');
      await change(what, row);
      expect(await readStatus(s, h, 6)).toBe(STATUS_CODE.FAILURE);
      // The reader is closed at the withdrawal, asynchronously: the descriptor goes a moment later.
      await soon('the descriptor to be closed', () => fdsOn(join(root, 'f.txt')) === 0);
      await closeHandle(s, h);
    });
  });

  it('goes on reading after an edit of the target\'s remark (same place, same options)', async () => {
    const { row, alias } = await aliased('remark');
    await withSsh2Sftp(asAdmin(), async (s) => {
      const h = await p<Buffer>((cb) => s.open(`${alias}/f.txt`, 'r', cb));
      expect((await read(s, h, 0, 6)).toString()).toBe('target');
      await change('remark edit', row);
      expect((await read(s, h, 6, 6)).toString()).toBe(' bytes');
      await closeHandle(s, h);
    });
  });
});

describe('a copy task whose source storage is withdrawn while its bytes move', () => {
  it.each(['delete', 'disable'] as const)('fails naming the source after a %s; nothing lands at the destination', async (what) => {
    const { root: srcRoot } = await local(`/cs-${what}-host`);
    await writeFile(join(srcRoot, 'big.bin'), randomBytes(1 << 20));
    const proxy = await holdingProxy(ts.url, 64 << 10);
    try {
      const source = `/cs-${what}`;
      ok(await createStorage(ts, admin, source, 'WebDav', { address: `http://127.0.0.1:${proxy.port}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: `/cs-${what}-host` }));
      const row = await rowOf(source);
      const { root: dstRoot } = await local(`/cs-${what}-dst`);
      ok(await ts.api('/api/fs/copy', { token: admin, body: { src_dir: source, dst_dir: `/cs-${what}-dst`, names: ['big.bin'] } }));
      // The put's temp file is in the destination folder once the first bytes went through.
      await until('the copy to be under way', async () => (proxy.sent() > 0 && (await readdir(dstRoot)).length > 0 ? true : undefined), 30_000, 10);
      await change(what, row);
      proxy.release(); // the rest of the old instance's bytes would now flow
      const task = (await settle(ts, admin, 'copy')).find((t) => t.name.includes(`[${source}]`));
      expect(task).toMatchObject({ state: 7, error: `source storage [${source}] was deleted or changed` });
      expect(await readdir(dstRoot)).toEqual([]);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it('an edit of the source\'s remark leaves the copy going: it lands whole', async () => {
    const { root: srcRoot } = await local('/cs-remark-host');
    const data = randomBytes(1 << 20);
    await writeFile(join(srcRoot, 'big.bin'), data);
    const proxy = await holdingProxy(ts.url, 64 << 10);
    try {
      ok(await createStorage(ts, admin, '/cs-remark', 'WebDav', { address: `http://127.0.0.1:${proxy.port}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/cs-remark-host' }));
      const row = await rowOf('/cs-remark');
      const { root: dstRoot } = await local('/cs-remark-dst');
      ok(await ts.api('/api/fs/copy', { token: admin, body: { src_dir: '/cs-remark', dst_dir: '/cs-remark-dst', names: ['big.bin'] } }));
      await until('the copy to be under way', async () => (proxy.sent() > 0 && (await readdir(dstRoot)).length > 0 ? true : undefined), 30_000, 10);
      await change('remark edit', row);
      proxy.release();
      const task = (await settle(ts, admin, 'copy')).find((t) => t.name.includes('[/cs-remark]'));
      expect(task).toMatchObject({ state: 2, error: '' });
      expect((await readFile(join(dstRoot, 'big.bin'))).equals(data)).toBe(true);
    } finally {
      await proxy.close();
    }
  }, 60_000);
});
