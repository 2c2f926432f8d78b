/**
 * SSH public keys through the REST API, with keys made by the real ssh-keygen and fingerprints
 * compared with what `ssh-keygen -lf` prints.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestServer } from './harness.js';
import { createUser, expectLogsFree, startRest } from './auth-helpers.js';
import { findKeyOwner, touchKey } from '../src/auth/sshkeys.js';

const SSH_KEYGEN = '/usr/bin/ssh-keygen';
if (!existsSync(SSH_KEYGEN)) throw new Error('ssh-keygen is required: apt-get install -y openssh-client');

interface Key { pub: string; priv: string; fingerprint: string }
interface KeyView { id: number; title: string; fingerprint: string; added_time: string; last_used_time: string }

let s: TestServer;
let admin: string;
let dir: string;
let alice: string;
let bob: string;
const keys: Record<string, Key> = {};
const secrets: string[] = [];

function keygen(name: string, args: string[]): Key {
  const file = join(dir, name);
  execFileSync(SSH_KEYGEN, ['-q', '-N', '', '-C', `${name}@test`, '-f', file, ...args]);
  const fingerprint = execFileSync(SSH_KEYGEN, ['-l', '-E', 'sha256', '-f', `${file}.pub`]).toString().split(' ')[1]!;
  return { pub: '', priv: file, fingerprint };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'treegate-keys-'));
  for (const [name, args] of Object.entries({
    ed25519: ['-t', 'ed25519'], ecdsa256: ['-t', 'ecdsa', '-b', '256'], ecdsa384: ['-t', 'ecdsa', '-b', '384'],
    ecdsa521: ['-t', 'ecdsa', '-b', '521'], rsa: ['-t', 'rsa', '-b', '2048'],
  })) {
    const k = keygen(name, args);
    k.pub = (await readFile(`${k.priv}.pub`, 'utf8')).trim();
    keys[name] = k;
  }
  s = await startRest();
  admin = await s.login();
  await createUser(s, admin, { username: 'alice', password: 'alice-pass' });
  await createUser(s, admin, { username: 'bob', password: 'bob-pass' });
  alice = await s.login('alice', 'alice-pass');
  bob = await s.login('bob', 'bob-pass');
  secrets.push(admin, alice, bob);
});
afterAll(async () => {
  // Key material is not a secret, but the server never needs to log it either.
  expectLogsFree(s, [...secrets, ...Object.values(keys).map((k) => k.pub.split(' ')[1]!)]);
  await s.close();
  await rm(dir, { recursive: true, force: true });
});

const list = async (token: string) => (await s.api<{ content: KeyView[]; total: number }>('/api/me/sshkey/list', { token })).data!;
const add = (token: string, title: unknown, key: unknown) => s.api('/api/me/sshkey/add', { token, body: { title, key } });

describe('adding keys', () => {
  it('stores every supported type with the fingerprint ssh-keygen prints', async () => {
    for (const [name, k] of Object.entries(keys)) {
      expect(await add(alice, name, k.pub), name).toEqual({ code: 200, message: 'success', data: null });
    }
    const savedTz = process.env.TZ;
    process.env.TZ = 'UTC'; // the server prints its local offset, UTC's as `Z`
    let got: Awaited<ReturnType<typeof list>>;
    try {
      got = await list(alice);
    } finally {
      if (savedTz === undefined) delete process.env.TZ;
      else process.env.TZ = savedTz;
    }
    expect(got.total).toBe(5);
    for (const [name, k] of Object.entries(keys)) {
      const v = got.content.find((x) => x.title === name)!;
      expect(v.fingerprint, name).toBe(k.fingerprint);
      expect(Object.keys(v).sort()).toEqual(['added_time', 'fingerprint', 'id', 'last_used_time', 'title']);
      // Go's RFC3339Nano, as AList writes times: no trailing zeros in the fraction, UTC as `Z`.
      expect(v.added_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z$/);
    }
  });

  it('reads an authorized_keys line with options and comment, skipping # and blank lines', async () => {
    const k = keys.ed25519!;
    const text = `# my keys\n\nfrom="10.0.0.1,host name",no-pty,command="echo \\"hi there\\"" ${k.pub} extra words\n${keys.rsa!.pub}\n`;
    expect(await add(bob, 'with-options', text)).toMatchObject({ code: 200 });
    expect((await list(bob)).content[0]!.fingerprint).toBe(k.fingerprint);
  });

  it('refuses private keys, garbage and mismatched types with 400 provided key invalid', async () => {
    const priv = await readFile(keys.ed25519!.priv, 'utf8');
    const [type, data] = keys.rsa!.pub.split(' ');
    for (const bad of [priv, 'not a key', 'ssh-ed25519 AAAA', `ssh-ed25519 ${data}`, `${type} ${data!.slice(0, -8)}`, '# only a comment']) {
      expect(await add(bob, `bad-${bad.length}`, bad)).toEqual({ code: 400, message: 'provided key invalid', data: null });
    }
  });

  it('answers request invalid for an empty title or key, and checks the title before the key', async () => {
    expect(await add(bob, '', keys.ed25519!.pub)).toMatchObject({ code: 400, message: 'request invalid' });
    expect(await add(bob, 'x', '')).toMatchObject({ code: 400, message: 'request invalid' });
    expect(await add(bob, 'with-options', keys.rsa!.pub)).toEqual({ code: 500, message: 'key with the same title already exists', data: null });
    expect(await add(bob, 'with-options', 'garbage')).toMatchObject({ code: 500, message: 'key with the same title already exists' });
    // Titles are unique per user only.
    expect(await add(bob, 'ed25519', keys.ed25519!.pub)).toMatchObject({ code: 200 });
  });

  it('pages like AList', async () => {
    const r = await s.api<{ content: KeyView[]; total: number }>('/api/me/sshkey/list?page=2&per_page=2', { token: alice });
    expect(r.data!.total).toBe(5);
    expect(r.data!.content.map((k) => k.title)).toEqual(['ecdsa384', 'ecdsa521']);
    expect(await s.api('/api/me/sshkey/list?page=x', { token: alice })).toMatchObject({ code: 400 });
  });
});

describe('deleting keys', () => {
  it("answers 404 for another user's key and unknown ids, 400 for bad ids", async () => {
    const aliceKey = (await list(alice)).content[0]!;
    expect(await s.api(`/api/me/sshkey/delete?id=${aliceKey.id}`, { token: bob, method: 'POST' })).toEqual({ code: 404, message: 'failed to get public key', data: null });
    expect(await s.api('/api/me/sshkey/delete?id=99999', { token: bob, method: 'POST' })).toMatchObject({ code: 404, message: 'failed to get public key' });
    expect(await s.api('/api/me/sshkey/delete?id=abc', { token: bob, method: 'POST' })).toEqual({ code: 400, message: 'id format invalid', data: null });
    expect(await s.api('/api/me/sshkey/delete', { token: bob, method: 'POST' })).toMatchObject({ code: 400, message: 'id format invalid' });
    expect((await list(alice)).total).toBe(5);
    expect(await s.api(`/api/me/sshkey/delete?id=${aliceKey.id}`, { token: alice, method: 'POST' })).toMatchObject({ code: 200 });
    expect((await list(alice)).total).toBe(4);
  });

  it('lets the admin list and delete any user key', async () => {
    const bobId = (await s.running.core.accounts.byName('bob'))!.id;
    const aliceId = (await s.running.core.accounts.byName('alice'))!.id;
    const r = await s.api<{ content: KeyView[]; total: number }>(`/api/admin/user/sshkey/list?uid=${bobId}`, { token: admin });
    expect(r.data!.total).toBe(2);
    expect(await s.api('/api/admin/user/sshkey/list?uid=x', { token: admin })).toMatchObject({ code: 400, message: 'user id format invalid' });
    expect(await s.api('/api/admin/user/sshkey/list?uid=4242', { token: admin })).toMatchObject({ code: 404, message: 'user invalid' });
    expect(await s.api(`/api/admin/user/sshkey/list?uid=${bobId}`, { token: bob })).toMatchObject({ code: 403 });
    const id = r.data!.content[0]!.id;
    expect(await s.api(`/api/admin/user/sshkey/delete?uid=${aliceId}&id=${id}`, { token: admin, method: 'POST' })).toMatchObject({ code: 404 });
    expect(await s.api(`/api/admin/user/sshkey/delete?uid=${bobId}&id=${id}`, { token: admin, method: 'POST' })).toMatchObject({ code: 200 });
    expect((await list(bob)).total).toBe(1);
  });
});

describe('SFTP helpers', () => {
  it('findKeyOwner matches the offered wire blob for that user only; touchKey updates last_used_time', async () => {
    const store = s.running.core.store;
    const blob = Buffer.from(keys.ecdsa256!.pub.split(' ')[1]!, 'base64');
    const hit = await findKeyOwner(store, 'alice', blob);
    expect(hit?.user.username).toBe('alice');
    expect(hit?.key.title).toBe('ecdsa256');
    expect(await findKeyOwner(store, 'bob', blob)).toBeUndefined();
    expect(await findKeyOwner(store, 'nobody', blob)).toBeUndefined();
    const flipped = Buffer.from(blob);
    flipped[flipped.length - 1]! ^= 1;
    expect(await findKeyOwner(store, 'alice', flipped)).toBeUndefined();
    const before = hit!.key.last_used_time;
    await new Promise((r) => setTimeout(r, 5));
    await touchKey(store, hit!.key.id);
    const after = (await list(alice)).content.find((k) => k.id === hit!.key.id)!;
    // Compared as times: the API writes Go's form, which drops a fraction's trailing zeros (.2, not .200).
    expect(Date.parse(after.last_used_time)).toBeGreaterThan(Date.parse(before));
    expect(Date.parse(after.added_time)).toBe(Date.parse(before));
  });

  it('deleting a user deletes their keys', async () => {
    const bobId = (await s.running.core.accounts.byName('bob'))!.id;
    expect(await s.api(`/api/admin/user/delete?id=${bobId}`, { token: admin, method: 'POST' })).toMatchObject({ code: 200 });
    expect(await s.running.core.store.sshKeys.findBy('user_id', bobId)).toEqual([]);
  });
});
