/**
 * Code-review probe of the remote drivers (S3, SFTP, FTP, WebDav) through the whole server: each
 * test proves one defect found by reading the driver, against the real server on loopback.
 */
import { randomBytes } from 'node:crypto';
import { chown, mkdir, symlink, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { startVsftpd, type Vsftpd } from '../drivers/testing/vsftpd.js';
import { DAV_TIMEOUTS } from '../drivers/webdav/http.js';
import { LINK_TIMEOUTS } from '../src/vfs/link.js';
import { createStorage, startRemoteServers, additionFor, type RemoteServers } from './remote-servers.js';

let ts: TestServer;
let admin: string;
let remote: RemoteServers<'S3' | 'SFTP' | 'WebDav'>;
let ftpd: Vsftpd;
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

beforeAll(async () => {
  [remote, ftpd] = await Promise.all([startRemoteServers(['S3', 'SFTP', 'WebDav'] as const), startVsftpd()]);
  ts = await startRestServer();
  admin = await ts.login();
  for (const d of ['S3', 'SFTP', 'WebDav'] as const) ok(await createStorage(ts, admin, `/${d.toLowerCase()}`, d, remote.additionOf(d)));
  ok(await createStorage(ts, admin, '/ftp', 'FTP', additionFor.FTP(ftpd)));
  // S3 downloads stream through treegate (instead of a redirect to the presigned URL) with native_proxy.
  ok(await createStorage(ts, admin, '/s3p', 'S3', { ...remote.additionOf('S3'), root_folder_path: '/proxied' }, { webdav_policy: 'native_proxy' }));
}, 60_000);

afterAll(async () => {
  await ts?.close();
  await Promise.allSettled([remote?.stop(), ftpd?.stop()]);
});

const fsCall = (op: string, body: unknown) => ts.api(`/api/fs/${op}`, { token: admin, body });
const listNames = async (path: string) => {
  const r = await ts.api<{ content: Array<{ name: string }> | null }>('/api/fs/list', { token: admin, body: { path, refresh: true } });
  ok(r);
  return (r.data!.content ?? []).map((e) => e.name).sort();
};

describe('SFTP: removing a folder', () => {
  it('removes a folder that holds what listings leave out (an upload temp file, a broken symlink)', async () => {
    const dir = join(remote.sshd.dataDir, 'leftovers');
    await mkdir(dir);
    await writeFile(join(dir, 'kept.txt'), 'x');
    await writeFile(join(dir, '.big.bin.tg-ab12cd34.tmp'), 'left by an upload cut off with treegate');
    await symlink(join(dir, 'gone'), join(dir, 'dangling'));
    ok(await fsCall('remove', { dir: '/sftp', names: ['leftovers'] }));
    expect(await listNames('/sftp')).not.toContain('leftovers');
  });
});

describe('FTP: a refusal is not "not found"', () => {
  it('deleting, renaming into and creating in a folder the FTP user may not write is refused, not "object not found"', async () => {
    const ro = join(ftpd.dataDir, 'ro');
    await mkdir(ro);
    await writeFile(join(ro, 'f.txt'), 'x');
    await chown(ro, 0, 0); // root's folder, 755: the ftp user can read it, not change it
    const outcomes = [
      await fsCall('remove', { dir: '/ftp/ro', names: ['f.txt'] }),
      await fsCall('rename', { path: '/ftp/ro/f.txt', name: 'g.txt' }),
      await fsCall('mkdir', { path: '/ftp/ro/sub' }),
    ].map((r) => [r.code, r.message]);
    // REST's remove takes "not found" for "already gone": the refused delete answered success.
    expect(outcomes.map(([code]) => code)).toEqual([403, 403, 403]);
    for (const [, message] of outcomes) expect(message).toMatch(/refused/);
    expect(await listNames('/ftp/ro')).toEqual(['f.txt']);
  });
});

/** GET through treegate's /dav; reads the first bytes, then stays paused for `pauseMs` before reading the rest. */
function slowDavGet(path: string, pauseMs: number): Promise<{ status: number; bytes: number; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(`${ts.url}/dav${path}`, { headers: { authorization: davAuth } }, (res) => {
      let bytes = 0;
      res.once('data', (first: Buffer) => {
        bytes += first.length;
        res.pause();
        setTimeout(() => {
          res.on('data', (c: Buffer) => { bytes += c.length; });
          res.once('end', () => resolve({ status: res.statusCode ?? 0, bytes, complete: res.complete }));
          res.once('error', () => resolve({ status: res.statusCode ?? 0, bytes, complete: false }));
          res.once('aborted', () => resolve({ status: res.statusCode ?? 0, bytes, complete: false }));
          res.resume();
        }, pauseMs);
      });
    });
    req.once('error', reject);
    req.end();
  });
}

describe('a download whose reader pauses', () => {
  it('FTP: a reader that stops reading for 20 s (a paused video player) still gets the whole file', async () => {
    const big = randomBytes(32 << 20); // well past every socket buffer on the way
    ok(await putFile(ts, admin, '/ftp/slow/big.bin', big));
    const got = await slowDavGet('/ftp/slow/big.bin', 20_000);
    expect(got).toEqual({ status: 200, bytes: big.length, complete: true });
  }, 60_000);

  // The drivers' idle timeouts, shortened here (same process) so a pause can outlast them quickly.
  it.each([['WebDav', '/webdav', DAV_TIMEOUTS], ['S3 (url link, proxied)', '/s3p', LINK_TIMEOUTS]] as const)(
    '%s: a reader that pauses longer than the idle timeout still gets the whole file', async (_d, mount, timeouts) => {
      const big = randomBytes(32 << 20);
      ok(await putFile(ts, admin, `${mount}/slow/big.bin`, big));
      const saved = timeouts.idleMs;
      timeouts.idleMs = 1500;
      try {
        expect(await slowDavGet(`${mount}/slow/big.bin`, 4000)).toEqual({ status: 200, bytes: big.length, complete: true });
      } finally {
        timeouts.idleMs = saved;
      }
    }, 60_000);
});

describe('S3: renaming a folder copies every key, then deletes the old ones', () => {
  it('a copy that fails midway leaves no partial folder under the new name; the old one is whole', async () => {
    const { PutObjectCommand, ListObjectsV2Command, S3Client } = await import('@aws-sdk/client-s3');
    const c = new S3Client({
      endpoint: `http://127.0.0.1:${remote.s3.port}`, region: 'us-east-1', forcePathStyle: true,
      credentials: { accessKeyId: remote.s3.accessKeyId, secretAccessKey: remote.s3.secretAccessKey },
    });
    const newName = 'mv-renamed-' + 'x'.repeat(90);
    // s3rver keeps `<key>._S3rver_metadata.json` under its folder: a key that just fits the host's
    // 4,095-byte path limit no longer does under the longer folder name, so that one copy fails.
    const room = 4095 - `${remote.s3.dir}/${remote.s3.bucket}/`.length - '._S3rver_metadata.json'.length;
    const deepLen = room - 'mv/'.length - 2;
    const deep = 'mv/' + Array.from({ length: Math.ceil(deepLen / 201) }, () => 'd'.repeat(200)).join('/').slice(0, deepLen).replace(/\/$/, 'd');
    const small = Array.from({ length: 12 }, (_, i) => `mv/a${String(i).padStart(2, '0')}.txt`);
    for (const Key of [...small, deep]) await c.send(new PutObjectCommand({ Bucket: remote.s3.bucket, Key, Body: 'x' }));
    const keys = async (Prefix: string) => ((await c.send(new ListObjectsV2Command({ Bucket: remote.s3.bucket, Prefix }))).Contents ?? []).map((o) => o.Key!);
    const r = await fsCall('rename', { path: '/s3/mv', name: newName });
    expect(r.code).toBe(500);
    expect(await keys(`${newName}/`)).toEqual([]);
    expect((await keys('mv/')).sort()).toEqual([...small, deep].sort());
    c.destroy();
  }, 60_000);
});

describe('SFTP: copying a folder streams every file through treegate', () => {
  it('a copy that fails midway leaves no partial folder at the destination', async () => {
    const src = join(remote.sshd.dataDir, 'cpsrc', 'tree');
    await mkdir(join(src, 'z'), { recursive: true });
    await mkdir(join(remote.sshd.dataDir, 'cpdst'));
    await writeFile(join(src, 'a.txt'), 'a');
    await writeFile(join(src, 'b.txt'), 'b');
    // A socket cannot be opened for reading (ENXIO): it fails the copy when it is reached. (A dangling
    // symlink no longer does: a link in a copied folder is copied as a link.)
    const sock = createServer();
    await new Promise<void>((r) => sock.listen(join(src, 'z', 'socket'), r));
    const r = await fsCall('copy', { src_dir: '/sftp/cpsrc', dst_dir: '/sftp/cpdst', names: ['tree'] }).finally(() => new Promise((res) => sock.close(res)));
    expect(r.code).toBe(500);
    expect(await listNames('/sftp/cpdst')).toEqual([]);
  });
});

describe('FTP: names a command line cannot carry', () => {
  it('a name with a line break is refused as an invalid name (400), not as a failing server', async () => {
    ok(await ts.api('/api/fs/mkdir', { token: admin, body: { path: '/ftp/nl' } }));
    const put = await putFile(ts, admin, '/ftp/nl/a\nb.txt', 'x');
    const made = await ts.api('/api/fs/mkdir', { token: admin, body: { path: '/ftp/nl/c\r\nd' } });
    expect([put.code, made.code]).toEqual([400, 400]);
    expect(await listNames('/ftp/nl')).toEqual([]);
  });
});
