/**
 * Code-review probe of the upload path into an existing folder (WebDAV PUT, SFTP OPEN) on a Local
 * storage, where the driver checks the folder and the target itself (Driver.checksPutTarget): each
 * test proves one answer that differed from the VFS's own lookups, against the whole server on loopback.
 */
import { lstat, mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { closeHandle, promised as p, statusCode, withSsh2Sftp, writeAt } from './clients/sftp.js';

const { STATUS_CODE } = ssh2.utils.sftp;

let s: TestServer;
const storage = (...parts: string[]) => join(s.dataDir, 'storage', ...parts);
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
const asAdmin = () => ({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD });

async function davPut(path: string, body: string): Promise<{ status: number; text: string }> {
  const r = await fetch(`${s.url}/dav${path}`, { method: 'PUT', headers: { authorization: davAuth }, body });
  return { status: r.status, text: await r.text() };
}

beforeAll(async () => {
  s = await startTestServer();
});

afterAll(async () => {
  await s?.close();
});

describe('a looping link at the target is nothing, as a dangling one (get and listings show nothing there)', () => {
  it('a WebDAV PUT onto a looping link (itself, or a link through one) replaces the link (was 409 "the parent collection does not exist")', async () => {
    await mkdir(storage('links'));
    await writeFile(storage('links', 'file.txt'), 'kept');
    await symlink('loop', storage('links', 'loop'));
    await symlink('loop/x', storage('links', 'thru-loop'));
    for (const name of ['thru-loop', 'loop']) { // thru-loop first: it leads through loop
      const r = await davPut(`/links/${name}`, `new ${name}`);
      expect({ name, status: r.status }).toEqual({ name, status: 201 });
      expect((await lstat(storage('links', name))).isFile()).toBe(true);
      expect(await readFile(storage('links', name), 'utf8')).toBe(`new ${name}`);
    }
    expect(await readFile(storage('links', 'file.txt'), 'utf8')).toBe('kept');
    expect((await readdir(storage('links'))).filter((n) => n.startsWith('.treegate'))).toEqual([]);
  });

  it('an SFTP OPEN for writing onto a looping link opens, and CLOSE lands the file (OPEN failed "the parent folder does not exist")', async () => {
    await mkdir(storage('sftp-links'));
    await symlink('loop', storage('sftp-links', 'loop'));
    await withSsh2Sftp(asAdmin(), async (sftp) => {
      const h = await p<Buffer>((cb) => sftp.open('/sftp-links/loop', 'w', cb));
      await writeAt(sftp, h, 0, 'landed');
      await closeHandle(sftp, h);
    });
    expect((await lstat(storage('sftp-links', 'loop'))).isFile()).toBe(true);
    expect(await readFile(storage('sftp-links', 'loop'), 'utf8')).toBe('landed');
  });
});

describe('an exclusive create onto a link that leads nowhere', () => {
  it('SFTP OPEN with CREAT|EXCL onto a dangling link fails at OPEN, as open(2) does (it opened, took the whole upload and failed at CLOSE)', async () => {
    await mkdir(storage('excl'));
    await symlink('gone', storage('excl', 'dangling'));
    let opened: number | undefined = -1;
    let closed: number | undefined = -1;
    await withSsh2Sftp(asAdmin(), async (sftp) => {
      const h = await new Promise<Buffer | undefined>((resolve) => sftp.open('/excl/dangling', 'wx', (e, handle) => {
        opened = e ? (e as { code?: number }).code : undefined;
        resolve(e ? undefined : handle);
      }));
      if (h) {
        await writeAt(sftp, h, 0, 'the whole upload');
        closed = await statusCode((cb) => sftp.close(h, cb));
      }
    });
    expect({ opened, closed }).toEqual({ opened: STATUS_CODE.FAILURE, closed: -1 });
    expect((await lstat(storage('excl', 'dangling'))).isSymbolicLink()).toBe(true);
    expect((await readdir(storage('excl'))).filter((n) => n.startsWith('.treegate'))).toEqual([]);
  });
});

describe('a missing folder is answered before the name is judged, as the VFS lookups did', () => {
  it('WebDAV PUT of a reserved temp-shaped name into a missing folder is 409, SFTP OPEN is "No such file" (were 400 and "reserved name")', async () => {
    const r = await davPut('/no-such-folder/.treegate-upload-x', 'x');
    expect(r.status).toBe(409);
    await withSsh2Sftp(asAdmin(), async (sftp) => {
      expect(await statusCode((cb) => sftp.open('/no-such-folder/.treegate-upload-y', 'w', (e) => cb(e)))).toBe(STATUS_CODE.NO_SUCH_FILE);
    });
    // In a folder that exists the name is still refused (400), and nothing is created.
    expect((await davPut('/.treegate-upload-z', 'x')).status).toBe(400);
    expect((await readdir(storage())).filter((n) => n.startsWith('.treegate'))).toEqual([]);
  });
});
