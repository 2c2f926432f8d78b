/** /api/admin/storage/* and /api/admin/driver/* (alist-compat §6, §7). */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWith } from '../src/sign.js';
import type { TestServer } from './harness.js';
import { expectCode, list, makeUser, names, ok, putFile, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
type Storage = Record<string, unknown> & { id: number; mount_path: string; status: string; addition: string; disabled: boolean };

const api = <T = unknown>(path: string, body?: unknown) => ts.api<T>(path, { token: admin, body, method: body === undefined && path.includes('/list') ? 'GET' : undefined });
const post = <T = unknown>(path: string, body: unknown = {}) => ts.api<T>(path, { token: admin, body });
const create = (body: Record<string, unknown>) => post<{ id: number }>('/api/admin/storage/create', body);

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

describe('storage list/get', () => {
  it('lists the first-start Local storage with AList fields', async () => {
    const r = await api<{ content: Storage[]; total: number }>('/api/admin/storage/list');
    ok(r);
    expect(r.data!.total).toBe(1);
    const s = r.data!.content[0]!;
    expect(s).toMatchObject({ mount_path: '/', driver: 'Local', status: 'work', disabled: false, webdav_policy: 'native_proxy' });
    for (const k of ['id', 'order', 'cache_expiration', 'remark', 'modified', 'disable_index', 'enable_sign', 'order_by', 'order_direction',
      'extract_folder', 'web_proxy', 'proxy_range', 'down_proxy_url']) expect(s).toHaveProperty(k);
    expect(typeof s.addition).toBe('string');
    expect(JSON.parse(s.addition)).toHaveProperty('root_folder_path');
  });

  it('get by id; bad id 400 with Go text; unknown id 500 record not found', async () => {
    const r = await ts.api<Storage>('/api/admin/storage/get?id=1', { token: admin });
    ok(r);
    expect(r.data!.mount_path).toBe('/');
    expectCode(await ts.api('/api/admin/storage/get?id=abc', { token: admin }), 400, 'strconv.Atoi: parsing "abc": invalid syntax');
    expectCode(await ts.api('/api/admin/storage/get?id=999', { token: admin }), 500, 'record not found');
  });

  it('is admin only', async () => {
    const u = await makeUser(ts, admin, 'plain', 0);
    expectCode(await ts.api('/api/admin/storage/list', { token: u }), 403, 'You are not an admin');
    expectCode(await ts.api('/api/admin/driver/names', { token: u }), 403, 'You are not an admin');
  });
});

describe('storage create/update/delete', () => {
  it('creates a storage, answers {id}, and mounts it', async () => {
    const r = await create({ mount_path: 'mem1/', driver: 'Memory', addition: '{}' });
    ok(r);
    expect(r.data!.id).toBeGreaterThan(1);
    ok(await putFile(ts, admin, '/mem1/a.txt', 'a'));
    expect(await names(ts, admin, '/mem1')).toEqual(['a.txt']);
    const got = await ts.api<Storage>(`/api/admin/storage/get?id=${r.data!.id}`, { token: admin });
    expect(got.data!.mount_path).toBe('/mem1');
    expect((await list(ts, admin, '/mem1')).data!.provider).toBe('Memory');
  });

  it('refuses a duplicate mount path, an unknown driver and a missing mount path', async () => {
    const dup = await create({ mount_path: '/mem1', driver: 'Memory' });
    expect(dup.code).toBe(500);
    expect(dup.data).toEqual({ id: 0 });
    const unknown = await create({ mount_path: '/x', driver: 'Nope' });
    expectCode(unknown, 500, 'failed get driver new: no driver named: Nope');
    expect(unknown.data).toEqual({ id: 0 });
    expect((await create({ driver: 'Memory' })).code).toBe(400);
  });

  it('an id past 2^53 or a wrongly typed field is 400 and creates nothing', async () => {
    const count = async () => (await api<{ total: number }>('/api/admin/storage/list')).data!.total;
    const before = await count();
    for (const bad of [{ id: 99999999999999999999 }, { id: 2.5 }, { order: '1x' }, { remark: 5 }, { driver: ['Memory'] }]) {
      const r = await create({ mount_path: '/typed-id', driver: 'Memory', ...bad });
      expect(r.code, JSON.stringify(bad)).toBe(400);
    }
    expect(await count()).toBe(before);
  });

  it('keeps a storage whose init failed and reports it with its id', async () => {
    const r = await create({ mount_path: '/broken', driver: 'Local', addition: JSON.stringify({ root_folder_path: '/nonexistent/treegate/root' }) });
    expect(r.code).toBe(500);
    expect(r.message).toMatch(/^failed init storage but storage is already created: failed init storage: /);
    const id = (r.data as { id: number }).id;
    expect(id).toBeGreaterThan(0);
    const got = await ts.api<Storage>(`/api/admin/storage/get?id=${id}`, { token: admin });
    expect(got.data!.status).not.toBe('work');
    expect((await list(ts, admin, '/broken')).code).toBe(500);
  });

  it('a Local storage without root_folder_path fails init instead of serving the host root', async () => {
    for (const [mount_path, extra] of [['/s7', {}], ['/s8', { addition: '{"root_folder_path":""}' }]] as const) {
      const r = await create({ mount_path, driver: 'Local', ...extra });
      expect(r.code).toBe(500);
      expect(r.message).toBe('failed init storage but storage is already created: failed init storage: root_folder_path is required: the host folder this storage serves');
      const got = await ts.api<Storage>(`/api/admin/storage/get?id=${(r.data as { id: number }).id}`, { token: admin });
      expect(got.data!.status).toBe('root_folder_path is required: the host folder this storage serves');
      expect((await list(ts, admin, mount_path)).code).toBe(500);
      expect((await ts.api('/api/fs/get', { token: admin, body: { path: `${mount_path}/etc/hostname` } })).code).toBe(500);
      // /d answers errors as an HTTP 200 envelope; the host's file must not be what comes back. A link
      // is anyone's: the storage's status is the admin's (sec-probe-leaks).
      const file = `${mount_path}/etc/hostname`;
      const raw = await fetch(`${ts.url}/d${file}?sign=${encodeURIComponent(signWith(ts.running.core.settings.get('token'), file, 0))}`);
      expect(JSON.parse(await raw.text())).toMatchObject({ code: 500, message: 'storage not available' });
    }
  });

  it('update moves the mount path; driver change and unknown id are 500', async () => {
    const r = await create({ mount_path: '/mem2', driver: 'Memory' });
    const id = r.data!.id;
    const s = (await ts.api<Storage>(`/api/admin/storage/get?id=${id}`, { token: admin })).data!;
    ok(await post('/api/admin/storage/update', { ...s, mount_path: '/mem2b', remark: 'moved' }));
    const root = await names(ts, admin, '/');
    expect(root).toContain('mem2b');
    expect(root).not.toContain('mem2');
    expect((await ts.api<Storage>(`/api/admin/storage/get?id=${id}`, { token: admin })).data!.remark).toBe('moved');
    expectCode(await post('/api/admin/storage/update', { ...s, driver: 'Local' }), 500, 'driver cannot be changed');
    expectCode(await post('/api/admin/storage/update', { ...s, id: 4242 }), 500, 'failed get old storage: record not found');
  });

  it('disable/enable, each refused when already in that state', async () => {
    const { id } = (await create({ mount_path: '/mem3', driver: 'Memory' })).data!;
    ok(await post(`/api/admin/storage/disable?id=${id}`));
    expectCode(await post(`/api/admin/storage/disable?id=${id}`), 500, 'this storage have disabled');
    expect((await list(ts, admin, '/mem3')).code).toBe(500);
    ok(await post(`/api/admin/storage/enable?id=${id}`));
    expectCode(await post(`/api/admin/storage/enable?id=${id}`), 500, 'this storage have enabled');
    ok(await list(ts, admin, '/mem3'));
  });

  it('delete unmounts; load_all answers at once', async () => {
    const { id } = (await create({ mount_path: '/mem4', driver: 'Memory' })).data!;
    ok(await post(`/api/admin/storage/delete?id=${id}`));
    expect(await names(ts, admin, '/')).not.toContain('mem4');
    expectCode(await post(`/api/admin/storage/delete?id=${id}`), 500, 'failed get storage: record not found');
    expectCode(await post('/api/admin/storage/delete?id=x'), 400, 'strconv.Atoi: parsing "x": invalid syntax');
    ok(await post('/api/admin/storage/load_all'));
  });

  it('a Local storage rooted elsewhere serves that folder', async () => {
    const root = mkdtempSync(join(tmpdir(), 'treegate-extra-'));
    ok(await create({ mount_path: '/extra', driver: 'Local', addition: JSON.stringify({ root_folder_path: root }) }));
    ok(await putFile(ts, admin, '/extra/e.txt', 'e'));
    expect(await names(ts, admin, '/extra')).toEqual(['e.txt']);
  });

  it('paging of the list', async () => {
    const all = (await api<{ content: Storage[]; total: number }>('/api/admin/storage/list')).data!;
    const p = await ts.api<{ content: Storage[]; total: number }>('/api/admin/storage/list?page=2&per_page=2', { token: admin });
    expect(p.data!.total).toBe(all.total);
    expect(p.data!.content.map((s) => s.id)).toEqual(all.content.slice(2, 4).map((s) => s.id));
  });
});

describe('drivers', () => {
  it('names lists the built-in drivers; list is keyed by name', async () => {
    const n = await ts.api<string[]>('/api/admin/driver/names', { token: admin });
    ok(n);
    expect(n.data).toEqual(expect.arrayContaining(['Local', 'Memory']));
    const l = await ts.api<Record<string, { config: { name: string } }>>('/api/admin/driver/list', { token: admin });
    expect(Object.keys(l.data!).sort()).toEqual([...n.data!].sort());
    expect(l.data!.Local!.config.name).toBe('Local');
  });

  it('info gives {common, additional, config}; an unknown driver is 404', async () => {
    const r = await ts.api<{ common: Array<{ name: string }>; additional: Array<{ name: string; default: string }>; config: Record<string, unknown> }>(
      '/api/admin/driver/info?driver=Local', { token: admin },
    );
    ok(r);
    expect(r.data!.common.map((i) => i.name)).toEqual([
      'mount_path', 'order', 'remark', 'webdav_policy', 'down_proxy_url', 'order_by', 'order_direction', 'extract_folder', 'disable_index', 'enable_sign',
    ]);
    expect(r.data!.additional[0]).toMatchObject({ name: 'root_folder_path', default: '/' });
    expect(r.data!.config).toMatchObject({ name: 'Local', only_local: true, no_cache: true });
    expectCode(await ts.api('/api/admin/driver/info?driver=Nope', { token: admin }), 404, 'driver [Nope] not found');
  });
});
