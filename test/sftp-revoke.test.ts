/**
 * An open SFTP connection follows its user's record: disabled, deleted, SFTP bit removed or password
 * changed (over REST or by another process, as `treegate admin set` does) ends the connection;
 * other permission or base_path changes apply to its next request while it stays open. A
 * connection that logged in with a registered key ends when that key is deleted.
 */
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Accounts } from '../src/auth/accounts.js';
import { JsonStore } from '../src/store/json-store.js';
import { createUser } from './auth-helpers.js';
import { PERM } from './fs-helpers.js';
import { startTestServer, type TestServer } from './harness.js';
import { makeKey, statusCode, type KeyPair } from './clients/sftp.js';

const STATUS = ssh2.utils.sftp.STATUS_CODE;
const RW = PERM.SFTP_READ | PERM.SFTP_MANAGE | PERM.WRITE;
const PASSWORD = 'revoke-pass-123';

let s: TestServer;
let admin: string;
let keyDir: string;
const storage = () => join(s.dataDir, 'storage');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const exists = (p: string) => stat(join(storage(), p)).then(() => true, () => false);

/** One ssh2 connection (password login, or the private key given) kept open across the test's steps. */
async function connect(username: string, password = PASSWORD, privateKey?: Buffer) {
  const client = new ssh2.Client();
  client.on('error', () => undefined); // a server-side disconnect is what some tests expect
  const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
    client.connect({ host: '127.0.0.1', port: s.sftpPort, username, ...(privateKey ? { privateKey } : { password }), readyTimeout: 20_000 });
  });
  const sftp = await new Promise<ssh2.SFTPWrapper>((resolve, reject) => client.sftp((e, w) => (e ? reject(e) : resolve(w))));
  let isClosed = false;
  void closed.then(() => (isClosed = true));
  return {
    /** Whether the server ended the connection within `ms`. */
    closedWithin: (ms: number) => Promise.race([closed.then(() => true), sleep(ms).then(() => false)]),
    isClosed: () => isClosed,
    mkdir: (p: string) => statusCode((cb) => sftp.mkdir(p, cb)),
    /** mkdir on a connection that may be gone: its status, 'no answer' (closed), or a thrown error. */
    mkdirAfterClose: (p: string) =>
      Promise.race([statusCode((cb) => sftp.mkdir(p, cb)).catch((e: Error) => e.message), sleep(2_000).then(() => 'no answer')]),
    list: (p: string) =>
      new Promise<string[]>((resolve, reject) => sftp.readdir(p, (e, l) => (e ? reject(e) : resolve(l.map((x) => x.filename).sort())))),
    end: () => client.end(),
  };
}

async function update(id: number, username: string, fields: Record<string, unknown>): Promise<void> {
  const r = await s.api('/api/admin/user/update', { token: admin, body: { id, username, ...fields } });
  expect(r, JSON.stringify(r)).toMatchObject({ code: 200 });
}

async function user(username: string, permission = RW): Promise<number> {
  return createUser(s, admin, { username, password: PASSWORD, permission });
}

beforeAll(async () => {
  s = await startTestServer();
  admin = await s.login();
  await mkdir(join(storage(), 'inner'), { recursive: true });
  await writeFile(join(storage(), 'inner', 'only-inside.txt'), 'x');
  keyDir = await mkdtemp(join(tmpdir(), 'treegate-revoke-keys-'));
});

afterAll(async () => {
  await s?.close();
  if (keyDir) await rm(keyDir, { recursive: true, force: true });
});

describe('an open SFTP connection after its user changes', () => {
  it('is closed when the user is disabled over the REST admin API', async () => {
    const id = await user('dora');
    const c = await connect('dora');
    expect(await c.mkdir('/dora-1')).toBeUndefined();
    await update(id, 'dora', { disabled: true });
    expect(await c.closedWithin(5_000)).toBe(true);
    expect(await c.mkdirAfterClose('/dora-2')).not.toBeUndefined();
    expect(await exists('dora-2')).toBe(false);
  });

  it('is closed when the user is deleted', async () => {
    const id = await user('dell');
    const c = await connect('dell');
    expect(await c.list('/')).toContain('inner');
    expect(await s.api(`/api/admin/user/delete?id=${id}`, { token: admin, method: 'POST' })).toMatchObject({ code: 200 });
    expect(await c.closedWithin(5_000)).toBe(true);
  });

  it('loses the write bit on its next request and stays open; base_path changes apply too', async () => {
    const id = await user('wendy');
    const c = await connect('wendy');
    expect(await c.mkdir('/wendy-1')).toBeUndefined();
    await update(id, 'wendy', { permission: PERM.SFTP_READ | PERM.SFTP_MANAGE });
    expect(await c.mkdir('/wendy-2')).toBe(STATUS.PERMISSION_DENIED);
    expect(await exists('wendy-2')).toBe(false);
    // The update bumped pwd_ts (REST tokens end), but the password is the same: the session goes on.
    expect(c.isClosed()).toBe(false);
    await update(id, 'wendy', { base_path: '/inner' });
    expect(await c.list('/')).toEqual(['only-inside.txt']);
    await update(id, 'wendy', { permission: RW });
    expect(await c.mkdir('/wendy-3')).toBeUndefined();
    expect(await exists('inner/wendy-3')).toBe(true);
    expect(c.isClosed()).toBe(false);
    c.end();
  });

  it('is closed when the SFTP login bit is removed (permission 0)', async () => {
    const id = await user('sam');
    const c = await connect('sam');
    expect(await c.mkdir('/sam-1')).toBeUndefined();
    await update(id, 'sam', { permission: 0 });
    expect(await c.closedWithin(5_000)).toBe(true);
    expect(await c.mkdirAfterClose('/sam-2')).not.toBeUndefined();
    expect(await exists('sam-2')).toBe(false);
  });

  it('is closed when the password is changed over REST', async () => {
    const id = await user('pat');
    const c = await connect('pat');
    expect(await c.mkdir('/pat-1')).toBeUndefined();
    await update(id, 'pat', { password: 'another-pass-456' });
    expect(await c.closedWithin(5_000)).toBe(true);
    await (await connect('pat', 'another-pass-456')).end();
  });

  it('is closed when another process changes the password (as `treegate admin set` does)', async () => {
    const id = await user('otto');
    const c = await connect('otto');
    expect(await c.mkdir('/otto-1')).toBeUndefined();
    const other = await JsonStore.open(join(s.dataDir, 'store.json'));
    try {
      await new Accounts(other).setPassword(id, 'external-pass-789');
    } finally {
      await other.close();
    }
    expect(await c.closedWithin(5_000)).toBe(true);
  });
});

describe('an open SFTP connection made with a registered key', () => {
  type KeyList = { content: Array<{ id: number; title: string }> };
  let keys = 0;
  /** Registers a new key for the user of `token`; its pair and id. */
  async function register(token: string, title: string): Promise<KeyPair & { id: number }> {
    const key = await makeKey(keyDir, `key-${++keys}`);
    expect(await s.api('/api/me/sshkey/add', { token, body: { title, key: key.pub } })).toMatchObject({ code: 200 });
    const list = await s.api<KeyList>('/api/me/sshkey/list', { token });
    return { ...key, id: list.data!.content.find((k) => k.title === title)!.id };
  }

  it('is closed when the user deletes that key; other keys and password logins stay open', async () => {
    await user('kim');
    const token = await s.login('kim', PASSWORD);
    const [used, other] = [await register(token, 'used'), await register(token, 'other')];
    const byKey = await connect('kim', undefined, await readFile(used.path));
    const byOtherKey = await connect('kim', undefined, await readFile(other.path));
    const byPassword = await connect('kim');
    expect(await byKey.mkdir('/kim-1')).toBeUndefined();
    expect(await s.api(`/api/me/sshkey/delete?id=${used.id}`, { token, method: 'POST' })).toMatchObject({ code: 200 });
    expect(await byKey.closedWithin(5_000)).toBe(true);
    expect(await byKey.mkdirAfterClose('/kim-2')).not.toBeUndefined();
    expect(await exists('kim-2')).toBe(false);
    expect(await byOtherKey.closedWithin(500)).toBe(false);
    expect(await byOtherKey.mkdir('/kim-3')).toBeUndefined();
    expect(await byPassword.mkdir('/kim-4')).toBeUndefined();
    byOtherKey.end();
    byPassword.end();
  });

  it('is closed when an admin deletes that key', async () => {
    const id = await user('ken');
    const token = await s.login('ken', PASSWORD);
    const used = await register(token, 'used');
    const c = await connect('ken', undefined, await readFile(used.path));
    expect(await c.list('/')).toContain('inner');
    expect(await s.api(`/api/admin/user/sshkey/delete?id=${used.id}&uid=${id}`, { token: admin, method: 'POST' })).toMatchObject({ code: 200 });
    expect(await c.closedWithin(5_000)).toBe(true);
  });
});
