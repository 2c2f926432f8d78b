/**
 * Defects found by reading the SFTP adapter's write and handle semantics (protocols/sftp), each
 * proven against the real server with ssh2's client on loopback.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { closeHandle as close, promised as p, statusCode, uploadLeftovers, until, withSsh2Sftp, writeAt as write } from './clients/sftp.js';

const { OPEN_MODE } = ssh2.utils.sftp;

let s: TestServer;
const asAdmin = () => ({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD });

beforeAll(async () => {
  s = await startTestServer();
});

afterAll(async () => {
  await s?.close();
});

describe('an OPEN still under way when the session ends', () => {
  // An update/exclusive OPEN waits (up to 1 s) for this session's writer on the same path to land;
  // the client disconnecting meanwhile ends the session before the new handle exists.
  const dropDuringOpen = (path: string, flags: number) =>
    withSsh2Sftp(asAdmin(), async (a, client) => {
      const h = await p<Buffer>((cb) => a.open(path, 'w', cb));
      await write(a, h, 0, 'first writer, never closed');
      a.open(path, flags, () => undefined); // waits for the writer above
      client.end();
    });

  it('an exclusive create (CREAT|EXCL) leaves no claim behind: a later exclusive create of the name succeeds', async () => {
    await dropDuringOpen('/excl-race.txt', OPEN_MODE.WRITE | OPEN_MODE.CREAT | OPEN_MODE.EXCL);
    // The name never landed (its only writer was aborted): an exclusive create must work once the server is done.
    let last: number | undefined;
    const ok = await until(async () => {
      last = await withSsh2Sftp(asAdmin(), (b) =>
        statusCode((cb) => b.open('/excl-race.txt', OPEN_MODE.WRITE | OPEN_MODE.CREAT | OPEN_MODE.EXCL, (e, h) => (e ? cb(e) : b.close(h, cb)))),
      );
      return last === undefined;
    }, 5000);
    expect(last).toBeUndefined();
    expect(ok).toBe(true);
  });

  it('an append OPEN leaves no spill file in DATA/tmp', async () => {
    await dropDuringOpen('/append-race.txt', OPEN_MODE.WRITE | OPEN_MODE.CREAT | OPEN_MODE.APPEND);
    expect(await until(async () => (await uploadLeftovers(s.dataDir)).length === 0, 5000)).toBe(true);
    expect(await readdir(join(s.dataDir, 'storage'))).not.toContain('append-race.txt');
  });
});

describe('an exclusive create (CREAT|EXCL) of a file this session is writing', () => {
  // One sshfs mount is one session for every app: app A creates f (O_CREAT|O_TRUNC, still open),
  // app B takes f as a lock file with O_CREAT|O_EXCL. STAT already answers that f exists.
  it('answers FAILURE (EEXIST) at OPEN, and the first writer lands its bytes', async () => {
    let excl: number | undefined;
    let stat: number | undefined;
    await withSsh2Sftp(asAdmin(), async (a) => {
      const h = await p<Buffer>((cb) => a.open('/lock', 'w', cb));
      await write(a, h, 0, 'pid 1');
      stat = await statusCode((cb) => a.stat('/lock', cb));
      excl = await statusCode((cb) => a.open('/lock', 'wx', (e, h2) => (e ? cb(e) : a.close(h2, cb))));
      await close(a, h);
    });
    expect(stat).toBeUndefined();
    expect(excl).toBe(ssh2.utils.sftp.STATUS_CODE.FAILURE);
    expect(await readFile(join(s.dataDir, 'storage', 'lock'), 'utf8')).toBe('pid 1');
  });
});

describe('a RENAME onto a file this session is writing (not landed yet)', () => {
  // POSIX (OpenSSH's server): plain RENAME refuses an existing target; posix-rename replaces the
  // target name, and the writer's bytes go to an orphaned inode. Here the writer's CLOSE landed over
  // the file moved there: the moved file's content was lost under both names.
  const renameOntoWriter = (name: string, rename: (a: ssh2.SFTPWrapper, from: string, to: string) => Promise<number | undefined>) =>
    withSsh2Sftp(asAdmin(), async (a) => {
      await p<void>((cb) => a.writeFile(`/${name}.src`, 'moved content', (e) => cb(e, undefined)));
      const h = await p<Buffer>((cb) => a.open(`/${name}`, 'w', cb));
      await write(a, h, 0, 'writer content');
      const renamed = await rename(a, `/${name}.src`, `/${name}`);
      const closed = await statusCode((cb) => a.close(h, cb));
      return { renamed, closed };
    });
  const storage = (n: string) => readFile(join(s.dataDir, 'storage', n), 'utf8').catch(() => undefined);

  it('plain RENAME answers FAILURE and moves nothing', async () => {
    const r = await renameOntoWriter('plain-target', (a, f, t) => statusCode((cb) => a.rename(f, t, cb)));
    expect(r).toEqual({ renamed: ssh2.utils.sftp.STATUS_CODE.FAILURE, closed: undefined });
    expect(await storage('plain-target.src')).toBe('moved content');
    expect(await storage('plain-target')).toBe('writer content');
  });

  it('posix-rename replaces the name: the moved file stays, the writer lands nothing', async () => {
    const r = await renameOntoWriter('posix-target', (a, f, t) => statusCode((cb) => a.ext_openssh_rename(f, t, cb)));
    expect(r).toEqual({ renamed: undefined, closed: undefined });
    expect(await storage('posix-target.src')).toBeUndefined();
    expect(await storage('posix-target')).toBe('moved content');
  });
});

describe('ftruncate (FSETSTAT size) of a new file before any byte was sent', () => {
  // `truncate -s 1M f`, `dd seek=… count=0` or a preallocating app through sshfs on a file that does
  // not exist yet: OPEN(WRITE|CREAT) then FSETSTAT size. The same on an existing file worked.
  it('extends it: holes read as zeros after CLOSE', async () => {
    let resized: number | undefined;
    await withSsh2Sftp(asAdmin(), async (a) => {
      const h = await p<Buffer>((cb) => a.open('/prealloc.bin', OPEN_MODE.WRITE | OPEN_MODE.CREAT, cb));
      resized = await statusCode((cb) => a.fsetstat(h, { size: 10 }, cb));
      await write(a, h, 0, 'abc');
      expect((await p<ssh2.Stats>((cb) => a.fstat(h, cb))).size).toBe(10);
      await close(a, h);
    });
    expect(resized).toBeUndefined();
    expect(await readFile(join(s.dataDir, 'storage', 'prealloc.bin'))).toEqual(Buffer.concat([Buffer.from('abc'), Buffer.alloc(7)]));
    expect(await uploadLeftovers(s.dataDir)).toEqual([]);
  });
});
