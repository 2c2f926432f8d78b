/**
 * Findings of a code review of the admin and /api/me REST routes, each shown against a real server:
 * what a user may store about themself is bounded (the SSH key text, the SSO id), and the user admin
 * routes bind a form body as AList (gin's ShouldBind) and the storage and meta routes do.
 */
import { generateKeyPairSync } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { createUser, serveForFile } from './auth-helpers.js';

let s: TestServer;
let admin: string;
const secrets: string[] = [];

serveForFile(secrets, (server, token) => ((s = server), (admin = token)));

/** An ed25519 public key line (`ssh-ed25519 <base64 wire blob>`), made without ssh-keygen. */
function ed25519Line(): string {
  const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
  const str = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, 0, b.length]), b]);
  return `ssh-ed25519 ${Buffer.concat([str(Buffer.from('ssh-ed25519')), str(raw)]).toString('base64')}`;
}

const storeSize = async () => (await stat(join(s.dataDir, 'store.json'))).size;

describe('what a user stores about themself is bounded', () => {
  it('an SSH key keeps only the key, not the 60 KiB of text pasted around it', async () => {
    await createUser(s, admin, { username: 'kira', password: 'kira-pass' });
    const token = await s.login('kira', 'kira-pass');
    secrets.push(token, 'kira-pass');
    const line = ed25519Line();
    const before = await storeSize();
    // A valid key line with a long comment, then a long `#` line: both are accepted, as OpenSSH does.
    const pasted = `${line} ${'c'.repeat(30_000)}\n#${'x'.repeat(30_000)}`;
    expect(await s.api('/api/me/sshkey/add', { token, body: { title: 'laptop', key: pasted } })).toMatchObject({ code: 200 });
    // 100 such keys per user made store.json (written whole on every change) 6 MB larger.
    expect((await storeSize()) - before).toBeLessThan(4096);
    const [k] = await s.running.core.store.sshKeys.findBy('title', 'laptop');
    expect(k!.key_str).toBe(line);
  });

  it('the SSO id a user sets for themself is bounded like the username', async () => {
    await createUser(s, admin, { username: 'sora', password: 'sora-pass' });
    const token = await s.login('sora', 'sora-pass');
    secrets.push(token, 'sora-pass');
    const before = await storeSize();
    const r = await s.api('/api/me/update', { token, body: { username: 'sora', sso_id: 'x'.repeat(500_000) } });
    expect(r).toMatchObject({ code: 400, message: 'invalid request: sso_id must be at most 255 characters' });
    expect((await storeSize()) - before).toBeLessThan(4096);
    expect((await s.api('/api/me/update', { token, body: { username: 'sora', sso_id: 'github-4711' } })).code).toBe(200);
    expect((await s.running.core.store.users.findBy('username', 'sora'))[0]!.sso_id).toBe('github-4711');
  });

  it('the admin cannot set an unbounded SSO id either', async () => {
    const r = await s.api('/api/admin/user/create', { token: admin, body: { username: 'sid', password: 'sid-pass', sso_id: 'y'.repeat(300) } });
    expect(r).toMatchObject({ code: 400, message: 'invalid request: sso_id must be at most 255 characters' });
  });
});

describe('user admin with a form body (gin binds forms as well as JSON)', () => {
  const form = (path: string, body: string) =>
    s.api(path, { token: admin, method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded' } });

  it('creates and updates a user from form fields: integers and booleans are text there', async () => {
    expect(await form('/api/admin/user/create', 'username=fay&password=fay-pass&permission=8&disabled=false&base_path=/f')).toMatchObject({ code: 200 });
    const [fay] = await s.running.core.store.users.findBy('username', 'fay');
    expect(fay).toMatchObject({ permission: 8, disabled: false, base_path: '/f' });
    expect(await form('/api/admin/user/update', `id=${fay!.id}&username=fay&permission=9&disabled=true&role=0`)).toMatchObject({ code: 200 });
    expect(await s.running.core.store.users.get(fay!.id)).toMatchObject({ permission: 9, disabled: true });
    // Text that is no integer or boolean is still refused.
    expect(await form('/api/admin/user/update', `id=${fay!.id}&username=fay&permission=nine`)).toMatchObject({ code: 400, message: 'invalid request: permission must be an integer' });
    expect(await form('/api/admin/user/update', `id=${fay!.id}&username=fay&disabled=maybe`)).toMatchObject({ code: 400, message: 'invalid request: disabled must be true or false' });
    // A JSON body keeps its types: a number sent as a string is refused there.
    expect(await s.api('/api/admin/user/create', { token: admin, body: { username: 'jay', permission: '8' } })).toMatchObject({ code: 400, message: 'invalid request: permission must be an integer' });
  });
});

describe('setting list', () => {
  it('with both group and groups, lists the groups (AList reads group only without groups)', async () => {
    const r = await s.api<Array<{ group: number }>>('/api/admin/setting/list?group=1&groups=2,4', { token: admin });
    expect(new Set(r.data!.map((i) => i.group))).toEqual(new Set([2, 4]));
  });
});
