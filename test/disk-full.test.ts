/**
 * A full disk through every protocol: a Local storage on a 1 MiB tmpfs. An upload that does not fit
 * answers the storage-full error each protocol has (REST envelope 500 "no space left on the
 * storage", WebDAV 507 Insufficient Storage, SFTP FAILURE with that message), leaves no temp file
 * and no partial file under its name, and a file it would have replaced keeps its bytes.
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import ssh2 from 'ssh2';
import { requireSftpTools, runSftp, withSsh2Sftp } from './clients/sftp.js';
import { smallDisk, type SmallDisk } from './small-disk.js';

const STATUS = ssh2.utils.sftp.STATUS_CODE;

let s: TestServer;
let sd: SmallDisk | undefined;
let work: string;
let disk: string;
let token: string;
const big = randomBytes(1536 * 1024); // more than the whole disk
const kept = Buffer.from('the bytes an upload that failed must not touch\n');

beforeAll(async () => {
  requireSftpTools([['sshpass', 'sshpass']]);
  sd = await smallDisk('1m', 'tg-full-');
  ({ work, disk } = sd);
  await writeFile(join(disk, 'kept.txt'), kept);
  await writeFile(join(work, 'big.bin'), big);
  s = await startTestServer();
  token = await s.login();
  const r = await s.api('/api/admin/storage/create', { token, body: { mount_path: '/full', driver: 'Local', addition: JSON.stringify({ root_folder_path: disk }) } });
  expect(r, JSON.stringify(r)).toMatchObject({ code: 200 });
});

afterAll(async () => {
  await s?.close();
  await sd?.remove();
});

/** What the disk holds: only what was there, never a temp file or a partial upload. */
async function expectUntouched(): Promise<void> {
  expect(await readdir(disk)).toEqual(['kept.txt']);
  expect((await readFile(join(disk, 'kept.txt'))).equals(kept)).toBe(true);
}

const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

describe('an upload bigger than the free space', () => {
  it.each(['new.bin', 'kept.txt'])('REST PUT to %s: envelope 500 "no space left on the storage"', async (name) => {
    const res = await fetch(`${s.url}/api/fs/put`, {
      method: 'PUT', body: big, headers: { authorization: token, 'file-path': `/full/${name}`, 'content-type': 'application/octet-stream' },
    });
    expect(await res.json()).toEqual({ code: 500, message: 'no space left on the storage', data: null });
    await expectUntouched();
  });

  it.each(['new.bin', 'kept.txt'])('WebDAV PUT to %s: 507 Insufficient Storage', async (name) => {
    const res = await fetch(`${s.url}/dav/full/${name}`, { method: 'PUT', body: big, headers: { authorization: basic } });
    await res.arrayBuffer();
    expect(res.status).toBe(507);
    await expectUntouched();
  });

  it('SFTP: OpenSSH sftp\'s put fails; the status carries the message (what FileZilla and WinSCP show)', async () => {
    const r = await runSftp({ port: s.sftpPort, user: 'admin', password: ADMIN_PASSWORD }, ['-put big.bin /full/new.bin', '-put big.bin /full/kept.txt'], { cwd: work });
    expect(r.stderr).toContain('remote: Failure'); // OpenSSH prints only the status's name
    await expectUntouched();
    const err = await withSsh2Sftp({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
      new Promise<(Error & { code?: number }) | null | undefined>((resolve) => sftp.fastPut(join(work, 'big.bin'), '/full/new.bin', (e) => resolve(e))),
    );
    expect(err).toMatchObject({ code: STATUS.FAILURE, message: 'no space left on the storage' });
    await expectUntouched();
  });
});

it('a WebDAV storage whose server is full (507) answers the same through treegate', async () => {
  // A second treegate mounts this one's /dav/full over WebDAV (different instances: no loop).
  const front = await startTestServer();
  try {
    const t = await front.login();
    const address = `${s.url}/dav/full`;
    const r = await front.api('/api/admin/storage/create', { token: t, body: { mount_path: '/remote', driver: 'WebDav', addition: JSON.stringify({ address, username: 'admin', password: ADMIN_PASSWORD }) } });
    expect(r, JSON.stringify(r)).toMatchObject({ code: 200 });
    const put = await fetch(`${front.url}/api/fs/put`, { method: 'PUT', body: big, headers: { authorization: t, 'file-path': '/remote/new.bin' } });
    expect(await put.json()).toEqual({ code: 500, message: 'no space left on the storage', data: null });
  } finally {
    await front.close();
  }
  await expectUntouched();
});

it('a small upload (written in one go) on a disk with no room left answers the same', async () => {
  const filler = join(disk, 'filler');
  await writeFile(filler, Buffer.alloc(0));
  // Fill every block: write until the file system refuses.
  await writeFile(filler, Buffer.alloc(1024 * 1024)).catch((e: NodeJS.ErrnoException) => expect(e.code).toBe('ENOSPC'));
  try {
    const res = await fetch(`${s.url}/dav/full/small.txt`, { method: 'PUT', body: randomBytes(16 * 1024), headers: { authorization: basic } });
    await res.arrayBuffer();
    expect(res.status).toBe(507);
    const put = await fetch(`${s.url}/api/fs/put`, { method: 'PUT', body: randomBytes(16 * 1024), headers: { authorization: token, 'file-path': '/full/small.txt' } });
    expect(await put.json()).toMatchObject({ code: 500, message: 'no space left on the storage' });
  } finally {
    await rm(filler);
  }
  await expectUntouched();
});
