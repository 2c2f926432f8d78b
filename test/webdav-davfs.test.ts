/**
 * davfs2 mounts /dav (a real kernel mount through FUSE; needs root and /dev/fuse) and reads and
 * writes a file. The config is a temp file (`buf_size 64` is needed on this kernel); the secrets
 * file is mode 0600, as mount.davfs demands.
 */
import { chmod, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, requireTool, run } from './clients/webdav.js';

let ts: TestServer;
let work: string;
let mnt: string;
let mounted = false;

beforeAll(async () => {
  requireTool('mount.davfs', 'davfs2');
  if (process.getuid?.() !== 0) throw new Error('the davfs2 test mounts a file system and must run as root');
  if (!existsSync('/dev/fuse')) throw new Error('/dev/fuse is missing: davfs2 needs FUSE');
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  work = await mkdtemp(join(tmpdir(), 'tg-davfs-'));
  await chmod(work, 0o711); // mount.davfs runs as user davfs2 and must reach its cache below
  mnt = join(work, 'mnt');
  const cache = join(work, 'cache');
  await mkdir(mnt);
  await mkdir(cache);
  await chmod(cache, 0o777); // mount.davfs drops to its own user for the cache
  await writeFile(join(work, 'secrets'), `${ts.url}/dav/ admin ${ADMIN_PASSWORD}\n`, { mode: 0o600 });
  await writeFile(
    join(work, 'davfs2.conf'),
    ['buf_size 64', `cache_dir ${cache}`, `secrets ${join(work, 'secrets')}`, 'delay_upload 0', 'use_locks 1', 'ask_auth 0', ''].join('\n'),
  );
  const dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
  expect((await dav('MKCOL', '/shared')).status).toBe(201);
  expect((await dav('PUT', '/shared/server.txt', { body: 'written over http\n' })).status).toBe(201);
  const m = await run('mount.davfs', [`${ts.url}/dav/`, mnt, '-o', `conf=${join(work, 'davfs2.conf')}`], { timeoutMs: 30_000 });
  if (m.code !== 0) throw new Error(`mount.davfs failed: ${m.stderr}`);
  mounted = true;
});

afterAll(async () => {
  if (mounted) await run('umount', [mnt], { timeoutMs: 60_000 });
  await ts?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('davfs2 mount', () => {
  it('lists and reads what the server holds', async () => {
    expect(await readdir(join(mnt, 'shared'))).toContain('server.txt');
    expect(await readFile(join(mnt, 'shared', 'server.txt'), 'utf8')).toBe('written over http\n');
  });

  it('writes a file that the server then serves', async () => {
    await writeFile(join(mnt, 'shared', 'from-mount.txt'), 'written through davfs2\n');
    expect(await readFile(join(mnt, 'shared', 'from-mount.txt'), 'utf8')).toBe('written through davfs2\n');
    // delay_upload 0: the upload happens on close, but allow the daemon a moment (bounded).
    const dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
    let body = '';
    for (let i = 0; i < 50 && body !== 'written through davfs2\n'; i++) {
      const r = await dav('GET', '/shared/from-mount.txt');
      body = r.status === 200 ? r.body : '';
      if (body !== 'written through davfs2\n') await new Promise((r) => setTimeout(r, 200));
    }
    expect(body).toBe('written through davfs2\n');
  });
});
