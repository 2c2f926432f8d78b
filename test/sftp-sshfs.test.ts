/**
 * sshfs mounts the SFTP server (a real kernel mount through FUSE; needs root and /dev/fuse, as the
 * davfs2 test) and creates a file with the shell: sshfs sends OPEN(CREAT|TRUNC) then STAT before
 * any WRITE, and fails the create unless that STAT finds the file being written.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { mountSshfs, run, type SshfsMount } from './clients/sftp.js';

let s: TestServer;
let sshfs: SshfsMount | undefined;
let mnt: string;

beforeAll(async () => {
  s = await startTestServer();
  const token = await s.login();
  sshfs = await mountSshfs(s.sftpPort, async (pub) => {
    expect(await s.api('/api/me/sshkey/add', { token, body: { title: 'k', key: pub } })).toMatchObject({ code: 200 });
  }, 'tg-sshfs-');
  mnt = sshfs.mnt;
});

afterAll(async () => {
  await sshfs?.close();
  await s?.close();
});

describe('sshfs mount', () => {
  it('creates a file with `echo hi > mnt/new.txt`', async () => {
    const r = await run('sh', ['-c', `echo hi > ${join(mnt, 'new.txt')}`]);
    expect(r.code, r.stderr).toBe(0);
    // The upload lands at CLOSE, which sshfs sends from FUSE's asynchronous release: on disk it
    // shows a moment later (a read through the mount waits for it: HandleTable.landed).
    const onDisk = join(s.dataDir, 'storage', 'new.txt');
    let body = '';
    for (let i = 0; i < 50 && body !== 'hi\n'; i++) {
      body = await readFile(onDisk, 'utf8').catch(() => '');
      if (body !== 'hi\n') await new Promise((r) => setTimeout(r, 100));
    }
    expect(body).toBe('hi\n');
    expect(await readFile(join(mnt, 'new.txt'), 'utf8')).toBe('hi\n');
  });

  it('an app opening a file read-write (O_RDWR) reads, rewrites and truncates it', async () => {
    const onDisk = join(s.dataDir, 'storage', 'rw.txt');
    await writeFile(onDisk, 'hello world');
    // Its own process: FUSE calls block, and this one serves the SFTP session behind the mount.
    const script = `
      const fs = require('node:fs');
      const fd = fs.openSync(process.argv[1], 'r+');
      const b = Buffer.alloc(5);
      fs.readSync(fd, b, 0, 5, 6);
      if (String(b) !== 'world') throw new Error('read back ' + b);
      fs.writeSync(fd, 'HELLO', 0);
      fs.ftruncateSync(fd, 8);
      fs.closeSync(fd);`;
    const r = await run(process.execPath, ['-e', script, join(mnt, 'rw.txt')]);
    expect(r.code, r.stderr).toBe(0);
    let body = '';
    for (let i = 0; i < 50 && body !== 'HELLO wo'; i++) {
      body = await readFile(onDisk, 'utf8').catch(() => '');
      if (body !== 'HELLO wo') await new Promise((r) => setTimeout(r, 100));
    }
    expect(body).toBe('HELLO wo');
  });
});
