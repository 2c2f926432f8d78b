/** /api/admin/user/* against a real server (alist-compat §8). */
import { describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { clearThrottle, createUser, serveForFile } from './auth-helpers.js';

interface UserView { id: number; username: string; password: string; base_path: string; role: number; disabled: boolean; permission: number; sso_id: string }

let s: TestServer;
let admin: string;
const secrets: string[] = [];

serveForFile(secrets, (server, token) => ((s = server), (admin = token)));

const post = <T = unknown>(path: string, body?: unknown, token = admin) => s.api<T>(path, { token, method: 'POST', body });
const get = <T = unknown>(path: string, token = admin) => s.api<T>(path, { token });

describe('list and get', () => {
  it('lists admin and guest in id order, without otp or secrets', async () => {
    const r = await get<{ content: UserView[]; total: number }>('/api/admin/user/list');
    expect(r.data!.total).toBe(2);
    expect(r.data!.content.map((u) => [u.id, u.username, u.role])).toEqual([[1, 'admin', 2], [2, 'guest', 1]]);
    expect(Object.keys(r.data!.content[0]!).sort()).toEqual(['base_path', 'disabled', 'id', 'password', 'permission', 'role', 'sso_id', 'username']);
    expect(r.data!.content.every((u) => u.password === '')).toBe(true);
  });

  it('gets one user; unknown and malformed ids are errors', async () => {
    expect((await get<UserView>('/api/admin/user/get?id=2')).data).toMatchObject({ username: 'guest', disabled: true, permission: 0 });
    expect(await get('/api/admin/user/get?id=77')).toEqual({ code: 500, message: 'failed get old user: record not found', data: null });
    expect(await get('/api/admin/user/get?id=x')).toMatchObject({ code: 400 });
  });
});

describe('create', () => {
  it('creates a general user with a cleaned base path', async () => {
    const id = await createUser(s, admin, { username: 'gina', password: 'gina-pass', base_path: 'data//gina/', permission: 8 });
    expect((await get<UserView>(`/api/admin/user/get?id=${id}`)).data).toMatchObject({ username: 'gina', base_path: '/data/gina', role: 0, permission: 8 });
    const t = await s.login('gina', 'gina-pass');
    expect((await get('/api/me', t)).data).toMatchObject({ username: 'gina' });
    secrets.push(t, 'gina-pass');
  });

  it('refuses admin/guest roles, duplicates, bad types and escaping base paths', async () => {
    expect(await post('/api/admin/user/create', { username: 'x1', password: 'p', role: 2 })).toEqual({ code: 400, message: 'admin or guest user can not be created', data: null });
    expect(await post('/api/admin/user/create', { username: 'x1', password: 'p', role: 1 })).toMatchObject({ code: 400, message: 'admin or guest user can not be created' });
    expect(await post('/api/admin/user/create', { username: 'gina', password: 'p' })).toEqual({ code: 500, message: 'UNIQUE constraint failed: x_users.username', data: null });
    expect(await post('/api/admin/user/create', { password: 'p' })).toMatchObject({ code: 400, message: 'invalid request: username is required' });
    expect(await post('/api/admin/user/create', { username: 'x1', permission: '8' })).toMatchObject({ code: 400, message: 'invalid request: permission must be an integer' });
    expect(await post('/api/admin/user/create', { username: 'x1', disabled: 'yes' })).toMatchObject({ code: 400, message: 'invalid request: disabled must be true or false' });
    expect(await post('/api/admin/user/create', { username: 'x1', base_path: '/a/../b' })).toMatchObject({ code: 400 });
    expect(await post('/api/admin/user/create', [1])).toMatchObject({ code: 400 });
    expect((await get<{ total: number }>('/api/admin/user/list')).data!.total).toBe(3);
  });

  it('accepts an empty password (AList does) and that password logs in', async () => {
    await createUser(s, admin, { username: 'nopw', password: '' });
    expect(await s.api('/api/auth/login', { body: { username: 'nopw', password: '' } })).toMatchObject({ code: 200 });
  });
});

describe('update', () => {
  it('ends the user tokens even without a password change, keeps the password and the 2FA secret', async () => {
    const id = await createUser(s, admin, { username: 'hank', password: 'hank-pass' });
    const t = await s.login('hank', 'hank-pass');
    const store = s.running.core.store;
    await store.users.update(id, { otp_secret: 'JBSWY3DPEHPK3PXP' });
    expect(await post('/api/admin/user/update', { id, username: 'hank', password: '', base_path: '/h', role: 0, permission: 9, disabled: false, sso_id: '' })).toMatchObject({ code: 200 });
    expect((await store.users.get(id))!.otp_secret).toBe('JBSWY3DPEHPK3PXP');
    await store.users.update(id, { otp_secret: '' });
    expect(await get('/api/me', t)).toMatchObject({ code: 401, message: 'Password has been changed, login please' });
    const t2 = await s.login('hank', 'hank-pass');
    expect((await get('/api/me', t2)).data).toMatchObject({ base_path: '/h', permission: 9 });
    expect(await post('/api/admin/user/update', { id, username: 'hank', password: 'hank-new' })).toMatchObject({ code: 200 });
    expect(await s.api('/api/auth/login', { body: { username: 'hank', password: 'hank-pass' } })).toMatchObject({ code: 400, message: 'password is incorrect' });
    secrets.push(t, t2, 'hank-pass', 'hank-new', await s.login('hank', 'hank-new'));
  });

  it('disables a user: refused at once by login and by the WebDAV credential cache', async () => {
    const id = await createUser(s, admin, { username: 'ivy', password: 'ivy-pass', permission: 256 });
    const accounts = s.running.core.accounts;
    const basic = () => accounts.authenticateCached({ username: 'ivy', password: 'ivy-pass', ip: '10.9.9.9', protocol: 'webdav' });
    expect((await basic()).ok).toBe(true);
    expect(await post('/api/admin/user/update', { id, username: 'ivy', disabled: true })).toMatchObject({ code: 200 });
    expect(await basic()).toEqual({ ok: false, reason: 'disabled' });
    expect(await s.api('/api/auth/login', { body: { username: 'ivy', password: 'ivy-pass' } })).toMatchObject({ code: 403 });
    secrets.push('ivy-pass');
  });

  it('refuses role changes, disabling the admin, unknown ids and duplicate names', async () => {
    expect(await post('/api/admin/user/update', { id: 1, username: 'admin', role: 0 })).toEqual({ code: 400, message: 'role can not be changed', data: null });
    expect(await post('/api/admin/user/update', { id: 1, username: 'admin', role: 2, disabled: true })).toEqual({ code: 400, message: 'admin user can not be disabled', data: null });
    expect(await post('/api/admin/user/update', { id: 999, username: 'zed' })).toMatchObject({ code: 500, message: 'failed get old user: record not found' });
    expect(await post('/api/admin/user/update', { username: 'zed' })).toMatchObject({ code: 400 });
    const ginaId = (await s.running.core.accounts.byName('gina'))!.id;
    expect(await post('/api/admin/user/update', { id: ginaId, username: 'hank' })).toMatchObject({ code: 500, message: 'UNIQUE constraint failed: x_users.username' });
    await clearThrottle(s);
  });
});

describe('delete and caches', () => {
  it('deletes general users only', async () => {
    expect(await post('/api/admin/user/delete?id=1')).toEqual({ code: 500, message: 'cannot delete admin or guest', data: null });
    expect(await post('/api/admin/user/delete?id=2')).toMatchObject({ code: 500, message: 'cannot delete admin or guest' });
    const id = (await s.running.core.accounts.byName('gina'))!.id;
    expect(await post(`/api/admin/user/delete?id=${id}`)).toMatchObject({ code: 200 });
    expect(await post(`/api/admin/user/delete?id=${id}`)).toMatchObject({ code: 500 });
    expect(await s.running.core.accounts.byName('gina')).toBeUndefined();
  });

  it('del_cache answers success', async () => {
    expect(await post('/api/admin/user/del_cache?username=admin')).toEqual({ code: 200, message: 'success', data: null });
  });
});
