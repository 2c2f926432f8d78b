/**
 * SFTP reads, listings and attributes, found by reading protocols/sftp/: READs pipelined in front
 * of a CLOSE, read buffers sized to the READ, the longname date of a file dated in the future, and
 * READDIR replies too big for a client.
 */
import { utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { promised, requireSftpTools, runSftp, withSsh2Sftp } from './clients/sftp.js';
import { createStorage } from './remote-servers.js';
import { putFile } from './fs-helpers.js';

let s: TestServer;
let admin: string;
const storage = (...parts: string[]) => join(s.dataDir, 'storage', ...parts);
const asAdmin = () => ({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD });

beforeAll(async () => {
  requireSftpTools();
  s = await startTestServer();
  admin = await s.login();
  expect((await createStorage(s, admin, '/mem', 'Memory', {})).code).toBe(200);
});

afterAll(async () => {
  await s?.close();
});

/** One READ: its bytes (empty at EOF) or the failure's status code. */
const readAt = (sftp: ssh2.SFTPWrapper, h: Buffer, off: number, len: number) =>
  new Promise<Buffer | number>((res) => {
    const buf = Buffer.alloc(len);
    sftp.read(h, buf, 0, len, off, (e, n) => res(e ? ((e as { code?: number }).code ?? -1) : Buffer.from(buf.subarray(0, n))));
  });

const pattern = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + (i >> 10)) & 255));

describe('READs pipelined in front of a CLOSE', () => {
  it('are answered with their bytes, not EOF, on local and remote (Memory) storage', async () => {
    const data = pattern(300_000);
    await writeFile(storage('rc.bin'), data);
    expect((await putFile(s, admin, '/mem/rc.bin', data)).code).toBe(200);
    for (const f of ['/rc.bin', '/mem/rc.bin']) {
      await withSsh2Sftp(asAdmin(), async (sftp) => {
        const h = await promised<Buffer>((cb) => sftp.open(f, 'r', cb));
        // Sent back to back, CLOSE last, as a client reading a known range and closing does.
        const reads = [0, 100_000, 200_000].map((o) => readAt(sftp, h, o, 100_000));
        const closed = promised<void>((cb) => sftp.close(h, (e) => cb(e, undefined)));
        const got = await Promise.all(reads);
        await closed;
        got.forEach((b, i) => expect(Buffer.isBuffer(b) && b.equals(data.subarray(i * 100_000, (i + 1) * 100_000)), `${f} read ${i}: ${Buffer.isBuffer(b) ? b.length : b}`).toBe(true));
        // The handle is gone once CLOSE is answered.
        expect(await readAt(sftp, h, 0, 10)).toBe(ssh2.utils.sftp.STATUS_CODE.FAILURE);
      });
    }
  });
});

describe('read buffers', () => {
  it('a handle read a few bytes at a time holds a buffer of that size, not 255 KiB', async () => {
    await writeFile(storage('small.txt'), 'small file, read in 16-byte pieces');
    await withSsh2Sftp(asAdmin(), async (sftp) => {
      const handles = await Promise.all(Array.from({ length: 200 }, () => promised<Buffer>((cb) => sftp.open('/small.txt', 'r', cb))));
      // The server runs in this process: its buffers count in this process's arrayBuffers.
      const before = process.memoryUsage().arrayBuffers;
      for (const h of handles) expect(await readAt(sftp, h, 0, 16)).toEqual(Buffer.from('small file, read'));
      const grown = process.memoryUsage().arrayBuffers - before;
      // 200 handles × 255 KiB was 51 MB, held until CLOSE.
      expect(grown).toBeLessThan(16 << 20);
      for (const h of handles) await promised<void>((cb) => sftp.close(h, (e) => cb(e, undefined)));
    });
  });
});

describe('longnames', () => {
  it('a file dated in the future shows its year (clients read a yearless date as a past one), a recent one its time', async () => {
    const day = 86400e3;
    const future = new Date(Date.now() + 30 * day);
    const recent = new Date(Date.now() - 30 * day);
    await writeFile(storage('future.txt'), 'f');
    await utimes(storage('future.txt'), future, future);
    await writeFile(storage('recent.txt'), 'r');
    await utimes(storage('recent.txt'), recent, recent);
    const list = await withSsh2Sftp(asAdmin(), (sftp) => promised<ssh2.FileEntry[]>((cb) => sftp.readdir('/', cb)));
    const row = (n: string) => list.find((e) => e.filename === n)!.longname;
    const md = (d: Date) => `${d.toUTCString().slice(8, 11)} ${String(d.getUTCDate()).padStart(2, ' ')}`;
    expect(row('future.txt')).toBe(`-rw-r--r--   1 admin    admin           1 ${md(future)}  ${future.getUTCFullYear()} future.txt`);
    const hm = recent.toISOString().slice(11, 16);
    expect(row('recent.txt')).toBe(`-rw-r--r--   1 admin    admin           1 ${md(recent)} ${hm} recent.txt`);
  });
});

describe('READDIR replies', () => {
  it('never pass the 256 KiB packet limit: a folder holding a name too long for any reply still lists (OpenSSH sftp)', async () => {
    // A Memory storage has no name limit; a 140 KB name and its longname make a 280 KB NAME reply.
    expect((await s.api('/api/fs/mkdir', { token: admin, body: { path: '/mem/long/' + 'n'.repeat(140_000) } })).code).toBe(200);
    expect((await putFile(s, admin, '/mem/long/ok.txt', 'ok')).code).toBe(200);
    const r = await runSftp({ port: s.sftpPort, user: 'admin', password: ADMIN_PASSWORD }, ['ls -1 /mem/long', 'get /mem/long/ok.txt /dev/null'], { timeoutMs: 30_000 });
    expect(r.stderr).not.toContain('too long');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('/mem/long/ok.txt');
  });

  it('a long name after a nearly full batch goes to the next reply instead of overflowing this one', async () => {
    // Each 250-byte name counts 619 bytes toward the 128 KiB batch: after 211 of them the batch is
    // not full yet, so the next entry (a 70 KB name, a 140 KB entry) was added: a 265 KB reply.
    const base = '/mem/mixed/';
    for (let i = 0; i < 211; i++) expect((await s.api('/api/fs/mkdir', { token: admin, body: { path: base + 'a' + String(i).padStart(3, '0') + 'x'.repeat(246) } })).code).toBe(200);
    expect((await s.api('/api/fs/mkdir', { token: admin, body: { path: base + 'b' + 'n'.repeat(70_000) } })).code).toBe(200);
    const r = await runSftp({ port: s.sftpPort, user: 'admin', password: ADMIN_PASSWORD }, ['ls -1 /mem/mixed'], { timeoutMs: 30_000 });
    expect(r.stderr).not.toContain('too long');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n').filter((l) => l.startsWith(base)).length).toBe(212);
  });
});
