/**
 * Meta rules and permission bits seen through SFTP: the same VFS decisions as REST (hide, write
 * grant, path password; bit10 login, bit11 + operation bits for writes), checked with the real
 * OpenSSH client. Files are laid out directly in the Local storage's folder.
 */
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { addMeta, PERM } from './fs-helpers.js';
import ssh2 from 'ssh2';
import { makeKey, requireSftpTools, runSftp, statusCode, withSsh2Sftp, type SftpLogin } from './clients/sftp.js';

const STATUS = ssh2.utils.sftp.STATUS_CODE;
/** Names the client listed (its stdout also echoes each batch command). */
const listed = (out: string) => out.split('\n').filter((l) => !l.startsWith('sftp>')).join('\n');

let s: TestServer;
let dir: string;
let admin: string;
let storage: string;
const logins = new Map<string, SftpLogin>();

async function user(name: string, permission: number): Promise<SftpLogin> {
  const password = `${name}-pass-123`;
  const r = await s.api('/api/admin/user/create', { token: admin, body: { username: name, password, base_path: '/', role: 0, permission, disabled: false } });
  expect(r, JSON.stringify(r)).toMatchObject({ code: 200 });
  const k = await makeKey(dir, name);
  expect(await s.api('/api/me/sshkey/add', { token: await s.login(name, password), body: { title: 'k', key: k.pub } })).toMatchObject({ code: 200 });
  const login = { port: s.sftpPort, user: name, key: k.path };
  logins.set(name, login);
  return login;
}

const exists = (p: string) => stat(join(storage, p)).then(() => true, () => false);

beforeAll(async () => {
  requireSftpTools();
  s = await startTestServer();
  dir = await mkdtemp(join(tmpdir(), 'treegate-sftp-rules-'));
  admin = await s.login();
  storage = join(s.dataDir, 'storage');
  for (const d of ['pub', 'drop', 'locked', 'ro']) await mkdir(join(storage, d), { recursive: true });
  await writeFile(join(storage, 'pub', 'readme.txt'), 'public');
  await writeFile(join(storage, 'pub', 'secret.txt'), 'hidden');
  await writeFile(join(storage, 'locked', 'inside.txt'), 'locked');
  await writeFile(join(storage, 'ro', 'keep.txt'), 'keep');
  await writeFile(join(dir, 'up.txt'), 'uploaded');
  await addMeta(s, admin, { path: '/pub', hide: '^secret', h_sub: true });
  await addMeta(s, admin, { path: '/drop', write: true, w_sub: true });
  await addMeta(s, admin, { path: '/locked', password: 'door', p_sub: true });
  await user('rita', PERM.SFTP_READ | PERM.SFTP_MANAGE | PERM.REMOVE | PERM.RENAME);
  await user('mona', PERM.SFTP_READ | PERM.WRITE | PERM.REMOVE | PERM.RENAME | PERM.MOVE);
  await user('wes', PERM.SFTP_READ | PERM.SFTP_MANAGE | PERM.WRITE);
  await user('nobody', PERM.WRITE | PERM.SFTP_MANAGE);
  await user('seer', PERM.SFTP_READ | PERM.SEE_HIDDEN | PERM.NO_PASSWORD);
});

afterAll(async () => {
  await s?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('meta rules over SFTP', () => {
  it('hide: absent from listings and NOT_FOUND on direct access; visible with the see-hidden bit', async () => {
    const r = await runSftp(logins.get('rita')!, ['ls /pub', `-get /pub/secret.txt ${join(dir, 'x')}`, '-ls /pub/secret.txt']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('readme.txt');
    expect(listed(r.stdout)).not.toContain('secret.txt');
    expect(r.stderr).toMatch(/secret\.txt.*not found/);
    await expect(stat(join(dir, 'x'))).rejects.toThrow();
    const code = await withSsh2Sftp({ port: s.sftpPort, username: 'rita', privateKey: await readFile(logins.get('rita')!.key!) }, (sftp) =>
      statusCode((cb) => sftp.stat('/pub/secret.txt', cb)),
    );
    expect(code).toBe(STATUS.NO_SUCH_FILE);
    const seer = await runSftp(logins.get('seer')!, ['ls /pub']);
    expect(listed(seer.stdout)).toContain('secret.txt');
  });

  it('rmdir of a folder whose only entries are hidden (meta hide, upload temp files) fails and keeps them', async () => {
    await mkdir(join(storage, 'pub', 'sub'));
    await writeFile(join(storage, 'pub', 'sub', 'secret.txt'), 'hidden below');
    await mkdir(join(storage, 'pub', 'tmps'));
    await writeFile(join(storage, 'pub', 'tmps', '.treegate-upload-live'), 'in flight');
    await mkdir(join(storage, 'pub', 'empty'));
    const r = await runSftp(logins.get('rita')!, ['ls /pub/sub', '-rmdir /pub/sub', '-rmdir /pub/tmps', 'rmdir /pub/empty']);
    expect(r.code, r.stderr).toBe(0);
    expect(listed(r.stdout)).not.toContain('secret.txt');
    expect((r.stderr.match(/remote rmdir "\/pub\/(sub|tmps)": Failure/g) ?? []).length, r.stderr).toBe(2);
    const code = await withSsh2Sftp({ port: s.sftpPort, username: 'rita', privateKey: await readFile(logins.get('rita')!.key!) }, (sftp) =>
      statusCode((cb) => sftp.rmdir('/pub/sub', cb)),
    );
    expect(code).toBe(STATUS.FAILURE);
    expect(await readFile(join(storage, 'pub', 'sub', 'secret.txt'), 'utf8')).toBe('hidden below');
    expect(await readFile(join(storage, 'pub', 'tmps', '.treegate-upload-live'), 'utf8')).toBe('in flight');
    expect(await exists('pub/empty')).toBe(false);
  });

  it('write: refused without the write bit, allowed where meta grants write', async () => {
    const up = join(dir, 'up.txt');
    const r = await runSftp(logins.get('rita')!, [`-put ${up} /ro/new.txt`, '-mkdir /ro/sub', `put ${up} /drop/new.txt`, 'mkdir /drop/sub']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/Permission denied/);
    expect(await exists('ro/new.txt')).toBe(false);
    expect(await exists('ro/sub')).toBe(false);
    expect(await readFile(join(storage, 'drop', 'new.txt'), 'utf8')).toBe('uploaded');
    expect(await exists('drop/sub')).toBe(true);
  });

  it('password-protected folders: refused unless the user may skip passwords', async () => {
    const r = await runSftp(logins.get('rita')!, ['-ls /locked', `-get /locked/inside.txt ${join(dir, 'in1')}`]);
    expect(r.code, r.stderr).toBe(0);
    await expect(stat(join(dir, 'in1'))).rejects.toThrow();
    // OpenSSH prints "not found" for any failed stat; the status itself is PERMISSION_DENIED.
    const codes = await withSsh2Sftp({ port: s.sftpPort, username: 'rita', privateKey: await readFile(logins.get('rita')!.key!) }, async (sftp) => [
      await statusCode((cb) => sftp.stat('/locked/inside.txt', cb)),
      await statusCode((cb) => sftp.readdir('/locked', (e) => cb(e))),
      await statusCode((cb) => sftp.open('/locked/inside.txt', 'r', (e) => cb(e))),
    ]);
    expect(codes).toEqual([STATUS.PERMISSION_DENIED, STATUS.PERMISSION_DENIED, STATUS.PERMISSION_DENIED]);
    const seer = await runSftp(logins.get('seer')!, ['ls /locked', `get /locked/inside.txt ${join(dir, 'in2')}`]);
    expect(seer.code, seer.stderr).toBe(0);
    expect(await readFile(join(dir, 'in2'), 'utf8')).toBe('locked');
  });
});

describe('permission bits over SFTP', () => {
  it('without the SFTP manage bit every write is refused; reads still work', async () => {
    const up = join(dir, 'up.txt');
    const r = await runSftp(logins.get('mona')!, [
      `get /ro/keep.txt ${join(dir, 'keep')}`,
      `-put ${up} /mona.txt`, '-mkdir /monadir', '-rm /ro/keep.txt', '-rename /ro/keep.txt /ro/moved.txt',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect((r.stderr.match(/Permission denied/g) ?? []).length).toBe(4);
    expect(await readFile(join(dir, 'keep'), 'utf8')).toBe('keep');
    expect(await exists('mona.txt')).toBe(false);
    expect(await exists('monadir')).toBe(false);
    expect(await exists('ro/keep.txt')).toBe(true);
  });

  it('manage + write bits allow uploads; remove and rename still need their own bits', async () => {
    const r = await runSftp(logins.get('wes')!, [`put ${join(dir, 'up.txt')} /wes.txt`, '-rm /wes.txt', '-rename /wes.txt /wes2.txt']);
    expect(r.code, r.stderr).toBe(0);
    expect((r.stderr.match(/Permission denied/g) ?? []).length).toBe(2);
    expect(await exists('wes.txt')).toBe(true);
    const rita = await runSftp(logins.get('rita')!, ['rename /drop/new.txt /drop/renamed.txt', 'rm /drop/renamed.txt']);
    expect(rita.code, rita.stderr).toBe(0);
    expect(await exists('drop/renamed.txt')).toBe(false);
  });

  it('without the SFTP login bit the login is refused', async () => {
    const r = await runSftp(logins.get('nobody')!, ['pwd']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Permission denied/);
  });
});
