/**
 * Defects found by reading the SFTP adapter (protocols/sftp), each proven against the real server
 * with ssh2's client (two sessions where another client's action matters; the full-disk case mounts a
 * tmpfs, so it runs as root like test/disk-full.test.ts).
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { closeHandle as close, promised as p, statusCode, withSsh2Sftp, writeAt as write } from './clients/sftp.js';
import { smallDisk } from './small-disk.js';

type Sftp = ssh2.SFTPWrapper;
const { STATUS_CODE } = ssh2.utils.sftp;

let s: TestServer;
const storage = (...parts: string[]) => join(s.dataDir, 'storage', ...parts);
const asAdmin = () => ({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD });
/** Upload temp files left in the storage root or DATA/tmp. */
const leftovers = async () => [...(await readdir(storage())).filter((n) => n.startsWith('.treegate')), ...(await readdir(join(s.dataDir, 'tmp')))];

/** Two sessions of the admin: `a` updates a file, `b` acts on it meanwhile. */
const twoSessions = (fn: (a: Sftp, b: Sftp) => Promise<void>) => withSsh2Sftp(asAdmin(), (a) => withSsh2Sftp(asAdmin(), (b) => fn(a, b)));

beforeAll(async () => {
  s = await startTestServer();
});

afterAll(async () => {
  await s?.close();
});

describe('an update (OPEN without TRUNC) while another session changes the file', () => {
  it('a REMOVE during the update is not undone at CLOSE (the removed bytes do not come back)', async () => {
    await writeFile(storage('removed.txt'), 'old-content');
    let closed: number | undefined;
    await twoSessions(async (a, b) => {
      const h = await p<Buffer>((cb) => a.open('/removed.txt', 'r+', cb));
      await write(a, h, 0, 'NEW');
      expect(await statusCode((cb) => b.unlink('/removed.txt', cb))).toBeUndefined();
      closed = await statusCode((cb) => a.close(h, cb));
    });
    expect(closed).toBe(STATUS_CODE.NO_SUCH_FILE); // told, not a silent loss
    expect(await readdir(storage())).not.toContain('removed.txt');
    expect(await leftovers()).toEqual([]);
  });

  it('an upload landed during the update is not overwritten with the old bytes (no lost update)', async () => {
    await writeFile(storage('replaced.txt'), 'old-content');
    let closed: number | undefined;
    await twoSessions(async (a, b) => {
      const h = await p<Buffer>((cb) => a.open('/replaced.txt', 'r+', cb));
      await write(a, h, 0, 'NEW');
      const o = await p<Buffer>((cb) => b.open('/replaced.txt', 'w', cb));
      await write(b, o, 0, 'the other upload');
      await close(b, o);
      closed = await statusCode((cb) => a.close(h, cb));
    });
    expect(closed).toBe(STATUS_CODE.FAILURE);
    expect(await readFile(storage('replaced.txt'), 'utf8')).toBe('the other upload');
    expect(await leftovers()).toEqual([]);
  });

});

/**
 * What FUSE (sshfs) sends when an app unlinks a file it has open (a scratch file: create, unlink,
 * keep using, close): a rename to .fuse_hidden… then, at the last close, CLOSE and at once the REMOVE
 * of that name; or a plain REMOVE (hard_remove). Checked by hand through an sshfs mount too.
 */
describe('a file this session is writing, removed or renamed before its CLOSE', () => {
  it('REMOVE succeeds and CLOSE lands nothing (unlink of an open file)', async () => {
    let removed: number | undefined;
    let closed: number | undefined;
    await withSsh2Sftp(asAdmin(), async (a) => {
      const h = await p<Buffer>((cb) => a.open('/scratch.txt', 'w', cb));
      await write(a, h, 0, 'scratch');
      removed = await statusCode((cb) => a.unlink('/scratch.txt', cb));
      expect(await statusCode((cb) => a.stat('/scratch.txt', cb))).toBe(STATUS_CODE.NO_SUCH_FILE);
      await write(a, h, 7, ' more'); // an unlinked file is still written to
      closed = await statusCode((cb) => a.close(h, cb));
    });
    expect(removed).toBeUndefined();
    expect(closed).toBeUndefined();
    expect(await readdir(storage())).not.toContain('scratch.txt');
    expect(await leftovers()).toEqual([]);
  });

  it('a rename to a hidden name, then CLOSE and REMOVE of that name sent together, leave nothing', async () => {
    let renamed: number | undefined;
    let answers: Array<number | undefined> = [];
    await withSsh2Sftp(asAdmin(), async (a) => {
      // An update of a 32 MiB file: its CLOSE streams the whole file into the put, so it is still
      // landing when the REMOVE is read.
      await writeFile(storage('hidden-then-gone.bin'), Buffer.alloc(32 << 20, 1));
      const h = await p<Buffer>((cb) => a.open('/hidden-then-gone.bin', 'r+', cb));
      await write(a, h, 0, 'NEW');
      renamed = await statusCode((cb) => a.ext_openssh_rename('/hidden-then-gone.bin', '/.fuse_hidden0001', cb));
      expect(await statusCode((cb) => a.stat('/.fuse_hidden0001', cb))).toBeUndefined();
      answers = await Promise.all([statusCode((cb) => a.close(h, cb)), statusCode((cb) => a.unlink('/.fuse_hidden0001', cb))]);
    });
    expect(renamed).toBeUndefined();
    expect(answers).toEqual([undefined, undefined]);
    expect((await readdir(storage())).filter((n) => n.includes('hidden'))).toEqual([]);
    expect(await leftovers()).toEqual([]);
  });
});

describe('DATA/tmp full', () => {
  it('an update whose temp copy does not fit answers a no-space failure, not an internal error', async () => {
    // DATA on a small disk: the storage's file fits, its copy in DATA/tmp (OPEN without TRUNC) does not.
    const disk = await smallDisk('8m', 'treegate-fix-sftp-full-');
    const full = await startTestServer({ dataDir: disk.disk });
    try {
      await mkdir(join(disk.disk, 'storage'), { recursive: true });
      await writeFile(join(disk.disk, 'storage', 'big.bin'), Buffer.alloc(5 << 20, 1));
      const err = await withSsh2Sftp({ port: full.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
        new Promise<(Error & { code?: number }) | null | undefined>((resolve) => sftp.open('/big.bin', 'r+', (e) => resolve(e))),
      );
      expect(err?.code).toBe(STATUS_CODE.FAILURE);
      expect(err?.message).toMatch(/space/i);
      expect(await readdir(join(disk.disk, 'tmp'))).toEqual([]);
    } finally {
      await full.close();
      await disk.remove();
    }
  });
});
