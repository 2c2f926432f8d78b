/**
 * SFTP against the real OpenSSH client: logins (key, password, refusals) and the everyday file
 * operations, with a 100 MB round trip checked by sha256.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { makeKey, requireSftpTools, runSftp, type KeyPair, type SftpLogin } from './clients/sftp.js';

let s: TestServer;
let dir: string;
let admin: string;
let key: KeyPair;

type KeyView = { id: number; title: string; last_used_time: string; added_time: string };

async function keys(token: string): Promise<KeyView[]> {
  const r = await s.api<{ content: KeyView[] }>('/api/me/sshkey/list', { token });
  return r.data!.content;
}

async function addKey(token: string, title: string, pub: string): Promise<number> {
  const r = await s.api('/api/me/sshkey/add', { token, body: { title, key: pub } });
  expect(r, JSON.stringify(r)).toMatchObject({ code: 200 });
  return (await keys(token)).find((k) => k.title === title)!.id;
}

const asAdmin = (): SftpLogin => ({ port: s.sftpPort, user: 'admin', key: key.path });

async function sha256(path: string): Promise<string> {
  const h = createHash('sha256');
  await pipeline(createReadStream(path), h);
  return h.digest('hex');
}

beforeAll(async () => {
  requireSftpTools();
  s = await startTestServer();
  dir = await mkdtemp(join(tmpdir(), 'treegate-sftp-'));
  admin = await s.login();
  key = await makeKey(dir, 'admin_key');
  await addKey(admin, 'laptop', key.pub);
});

afterAll(async () => {
  await s?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('login', () => {
  it('accepts a registered key and records its last use', async () => {
    const before = (await keys(admin)).find((k) => k.title === 'laptop')!;
    await new Promise((r) => setTimeout(r, 20));
    const r = await runSftp(asAdmin(), ['pwd', 'ls /']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Remote working directory: /');
    const after = (await keys(admin)).find((k) => k.title === 'laptop')!;
    expect(Date.parse(after.last_used_time)).toBeGreaterThan(Date.parse(before.last_used_time));
  });

  it('accepts a password (keyboard-interactive and password methods)', async () => {
    for (const method of ['keyboard-interactive', 'password']) {
      const r = await runSftp({ port: s.sftpPort, user: 'admin', password: ADMIN_PASSWORD, args: ['-o', `PreferredAuthentications=${method}`] }, ['pwd']);
      expect(r.code, `${method}: ${r.stderr}`).toBe(0);
    }
  });

  it('refuses an unregistered key and a wrong password', async () => {
    const other = await makeKey(dir, 'other_key');
    const r = await runSftp({ port: s.sftpPort, user: 'admin', key: other.path }, ['pwd']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Permission denied/);
    const p = await runSftp({ port: s.sftpPort, user: 'admin', password: 'wrong-password' }, ['pwd'], { timeoutMs: 30_000 });
    expect(p.code).not.toBe(0);
    await s.login(); // a success clears this IP's failure count for the tests below
  });

  it('refuses a key deleted over REST at once', async () => {
    const k = await makeKey(dir, 'temp_key');
    const id = await addKey(admin, 'temp', k.pub);
    const login = { port: s.sftpPort, user: 'admin', key: k.path };
    expect((await runSftp(login, ['pwd'])).code).toBe(0);
    expect(await s.api(`/api/me/sshkey/delete?id=${id}`, { token: admin, method: 'POST' })).toMatchObject({ code: 200 });
    const r = await runSftp(login, ['pwd']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Permission denied/);
  });

  it('refuses a disabled user by key and by password', async () => {
    const body = { username: 'dora', password: 'dora-pass-1', base_path: '/', role: 0, permission: 1024 | 2048 | 8, disabled: false };
    expect(await s.api('/api/admin/user/create', { token: admin, body })).toMatchObject({ code: 200 });
    const token = await s.login('dora', 'dora-pass-1');
    const k = await makeKey(dir, 'dora_key');
    await addKey(token, 'dora', k.pub);
    expect((await runSftp({ port: s.sftpPort, user: 'dora', key: k.path }, ['pwd'])).code).toBe(0);
    const users = await s.api<{ content: Array<{ id: number; username: string }> }>('/api/admin/user/list', { token: admin });
    const id = users.data!.content.find((u) => u.username === 'dora')!.id;
    expect(await s.api('/api/admin/user/update', { token: admin, body: { ...body, id, password: '', disabled: true } })).toMatchObject({ code: 200 });
    expect((await runSftp({ port: s.sftpPort, user: 'dora', key: k.path }, ['pwd'])).code).not.toBe(0);
    expect((await runSftp({ port: s.sftpPort, user: 'dora', password: 'dora-pass-1' }, ['pwd'], { timeoutMs: 30_000 })).code).not.toBe(0);
    await s.login();
  });
});

describe('file operations', () => {
  it('mkdir, put, ls -l, get, rename, rm, rmdir', async () => {
    const local = join(dir, 'hello.txt');
    await writeFile(local, 'hello over sftp\n');
    const back = join(dir, 'back.txt');
    const r = await runSftp(asAdmin(), [
      'mkdir /ops',
      `put ${local} /ops/hello.txt`,
      'ls -l /ops',
      `get /ops/hello.txt ${back}`,
      'rename /ops/hello.txt /ops/renamed.txt',
      'ls /ops',
      '-rmdir /ops',
      'rm /ops/renamed.txt',
      'rmdir /ops',
      '-ls /ops',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(await readFile(back, 'utf8')).toBe('hello over sftp\n');
    expect(r.stdout).toMatch(/-rw-r--r--\s+\d+\s+admin\s+admin\s+16 \w{3} [ \d]\d [\d:]{5} \/?(ops\/)?hello\.txt/);
    expect(r.stdout).toContain('renamed.txt');
    expect(r.stderr).toMatch(/remote rmdir "\/ops": Failure/); // not empty
    expect(r.stderr).toMatch(/No such file or directory|not found/);
    await expect(stat(join(s.dataDir, 'storage', 'ops'))).rejects.toThrow();
  });

  it('put -p keeps the mtime; rename replaces only with posix-rename semantics', async () => {
    const local = join(dir, 'old.txt');
    await writeFile(local, 'old');
    const when = new Date('2001-02-03T04:05:06Z');
    await utimes(local, when, when);
    const r = await runSftp(asAdmin(), [`put -p ${local} /old.txt`, `put ${local} /other.txt`, 'rename /other.txt /old.txt']);
    expect(r.code, r.stderr).toBe(0);
    expect((await stat(join(s.dataDir, 'storage', 'old.txt'))).mtime.toISOString()).not.toBe(when.toISOString()); // replaced by the rename
    const again = await runSftp(asAdmin(), [`put -p ${local} /kept.txt`, 'ls -l /kept.txt']);
    expect(again.code, again.stderr).toBe(0);
    expect((await stat(join(s.dataDir, 'storage', 'kept.txt'))).mtime.toISOString()).toBe(when.toISOString());
    expect(again.stdout).toMatch(/Feb  3  2001/);
  });

  // RekeyLimit makes the client renegotiate keys every 8 MB of the transfer, in the middle of the
  // data stream, as OpenSSH does every few GiB by default.
  it.each(['aes128-gcm@openssh.com', 'chacha20-poly1305@openssh.com'])('round-trips a 100 MB file unchanged (sha256), %s, rekeying', async (cipher) => {
    const big = join(dir, 'big.bin');
    const out = createWriteStream(big);
    const chunk = Buffer.alloc(1 << 20);
    for (let i = 0; i < 100; i++) {
      for (let j = 0; j < chunk.length; j += 4) chunk.writeUInt32LE((i * 2654435761 + j * 40503) >>> 0, j);
      if (!out.write(chunk)) await new Promise((r) => out.once('drain', () => r(null)));
    }
    await new Promise<void>((r, j) => out.end((e?: Error) => (e ? j(e) : r())));
    const back = join(dir, 'big.back');
    const login = { ...asAdmin(), args: ['-c', cipher, '-o', 'RekeyLimit=8M'] };
    const r = await runSftp(login, [`put ${big} /big.bin`, `get /big.bin ${back}`], { timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    const want = await sha256(big);
    expect(await sha256(join(s.dataDir, 'storage', 'big.bin'))).toBe(want);
    expect(await sha256(back)).toBe(want);
    await rm(big);
    await rm(back);
  }, 180_000);
});
