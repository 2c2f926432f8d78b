/**
 * Findings of the authentication probe about SSH keys: the size of pasted key text is bounded (each
 * line costs a key parse: a 1 MiB body held the event loop for half a second); one public key
 * registered by two users logs each in as themselves only, and deleting it for one leaves the other.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { createUser } from './auth-helpers.js';
import { PERM } from './fs-helpers.js';
import { makeKey, withSsh2Sftp, type KeyPair } from './clients/sftp.js';

let s: TestServer;
let admin: string;
let dir: string;
let key: KeyPair;

beforeAll(async () => {
  s = await startTestServer();
  admin = await s.login();
  dir = await mkdtemp(join(tmpdir(), 'treegate-probe-keys-'));
  key = await makeKey(dir, 'shared');
});
afterAll(async () => {
  await s?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

type KeyList = { content: Array<{ id: number; title: string }>; total: number };

/** Whether `username` gets an SFTP session with the shared key. */
async function keyLogin(username: string): Promise<boolean> {
  const privateKey = await readFile(key.path);
  return withSsh2Sftp({ port: s.sftpPort, username, privateKey }, async () => true).catch(() => false);
}

describe('key text', () => {
  it('over 64 KiB is refused, even when its first line is a valid key', async () => {
    const text = `${key.pub}\n${'x ssh-ed25519 AAAA\n'.repeat(4000)}`;
    expect(await s.api('/api/me/sshkey/add', { token: admin, body: { title: 'huge', key: text } })).toEqual({ code: 400, message: 'provided key invalid', data: null });
    expect((await s.api<KeyList>('/api/me/sshkey/list', { token: admin })).data!.total).toBe(0);
    // The same key alone is fine.
    expect(await s.api('/api/me/sshkey/add', { token: admin, body: { title: 'plain', key: key.pub } })).toMatchObject({ code: 200 });
  });
});

describe('one public key registered by two users', () => {
  it('logs each in as themselves; deleting it for one leaves the other', async () => {
    const tokens: string[] = [];
    for (const name of ['kann', 'kbob']) {
      await createUser(s, admin, { username: name, password: `${name}-pass`, permission: PERM.SFTP_READ });
      const token = await s.login(name, `${name}-pass`);
      expect(await s.api('/api/me/sshkey/add', { token, body: { title: 'laptop', key: key.pub } })).toMatchObject({ code: 200 });
      tokens.push(token);
    }
    const [ann, bob] = tokens as [string, string];
    expect(await keyLogin('kann')).toBe(true);
    expect(await keyLogin('kbob')).toBe(true);
    // A third user, who never registered it, is refused.
    await createUser(s, admin, { username: 'kcarl', password: 'kcarl-pass', permission: PERM.SFTP_READ });
    expect(await keyLogin('kcarl')).toBe(false);

    const annKeys = (await s.api<KeyList>('/api/me/sshkey/list', { token: ann })).data!;
    const bobKeys = (await s.api<KeyList>('/api/me/sshkey/list', { token: bob })).data!;
    expect([annKeys.total, bobKeys.total]).toEqual([1, 1]);
    expect(annKeys.content[0]!.id).not.toBe(bobKeys.content[0]!.id);
    // Bob cannot delete Ann's record of the same key, and learns nothing about it.
    expect(await s.api(`/api/me/sshkey/delete?id=${annKeys.content[0]!.id}`, { token: bob, method: 'POST' })).toEqual({ code: 404, message: 'failed to get public key', data: null });
    expect(await s.api(`/api/me/sshkey/delete?id=${bobKeys.content[0]!.id}`, { token: bob, method: 'POST' })).toMatchObject({ code: 200 });
    expect(await keyLogin('kbob')).toBe(false);
    expect(await keyLogin('kann')).toBe(true);
  });
});
