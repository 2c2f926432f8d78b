/**
 * Admin storage API against AList v3's texts (internal/op/storage.go, internal/db/storage.go): the
 * messages AList's front end shows and scripts match, for failures of the storage table and for ids
 * that name no storage; driver templates as AList's admin page reads them. And the template driver, the skeleton new drivers are copied from: every
 * option it declares (shown in its admin form) is one its driver reads.
 */
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { templateDefinition } from '../drivers/template/index.js';
import { parseOptions } from '../drivers/options.js';
import type { DriverDefinition } from '../drivers/types.js';
import { NO_ARGS, objAt, readAll, rootObj } from '../drivers/conformance/helpers.js';
import type { TestServer } from './harness.js';
import { expectCode, ok, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
type Storage = Record<string, unknown> & { id: number; mount_path: string };

const post = <T = unknown>(path: string, body: unknown = {}) => ts.api<T>(path, { token: admin, body });
const create = (body: Record<string, unknown>) => post<{ id: number }>('/api/admin/storage/create', body);
const get = async (id: number) => (await ts.api<Storage>(`/api/admin/storage/get?id=${id}`, { token: admin })).data!;
const count = async () => (await ts.api<{ total: number }>('/api/admin/storage/list', { token: admin })).data!.total;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

describe('a change the storage table refuses', () => {
  it("create over a taken mount path or id answers AList's `failed create storage in database: <db error>`, {id: 0}", async () => {
    const { id } = (await create({ mount_path: '/taken', driver: 'Memory' })).data!;
    const before = await count();
    // `taken/` and `/x/../taken` are cleaned to the taken path before the table sees them.
    for (const mount_path of ['/taken', 'taken/', '/x/../taken']) {
      const r = await create({ mount_path, driver: 'Memory' });
      expectCode(r, 500, 'failed create storage in database: UNIQUE constraint failed: x_storages.mount_path');
      expect(r.data).toEqual({ id: 0 });
    }
    expectCode(await create({ id, mount_path: '/other', driver: 'Memory' }), 500, 'failed create storage in database: UNIQUE constraint failed: x_storages.id');
    expect(await count()).toBe(before);
  });

  it("update onto another storage's mount path answers `failed update storage in database: <db error>` and changes nothing", async () => {
    const a = await get((await create({ mount_path: '/upd-a', driver: 'Memory' })).data!.id);
    await create({ mount_path: '/upd-b', driver: 'Memory' });
    expectCode(await post('/api/admin/storage/update', { ...a, mount_path: '/upd-b/', remark: 'moved' }), 500,
      'failed update storage in database: UNIQUE constraint failed: x_storages.mount_path');
    expect(await get(a.id)).toMatchObject({ mount_path: '/upd-a', remark: '', status: 'work' });
  });
});

describe('an id that names no storage', () => {
  it("delete, enable and disable answer AList's `failed get storage: record not found`; get answers `record not found`", async () => {
    for (const action of ['delete', 'enable', 'disable']) {
      expectCode(await post(`/api/admin/storage/${action}?id=4242`), 500, 'failed get storage: record not found');
    }
    expectCode(await ts.api('/api/admin/storage/get?id=4242', { token: admin }), 500, 'record not found');
    // A storage deleted once is unknown the second time.
    const { id } = (await create({ mount_path: '/gone', driver: 'Memory' })).data!;
    ok(await post(`/api/admin/storage/delete?id=${id}`));
    expectCode(await post(`/api/admin/storage/delete?id=${id}`), 500, 'failed get storage: record not found');
  });
});

describe('the template driver (drivers/template)', () => {
  it('reads every option it declares: none is a form field that does nothing', async () => {
    const def = templateDefinition as unknown as DriverDefinition;
    const read = new Set<string>();
    const values = parseOptions(def, { max_file_size: 1024 });
    const watched = new Proxy(values, { get: (o, k) => (typeof k === 'string' && read.add(k), Reflect.get(o, k)) });
    const d = await def.create(watched, { log: undefined as never, dataDir: '' });
    // Everything the skeleton can do: each place an option could be read.
    await d.init(new AbortController().signal);
    await d.mkdir!(rootObj, 'dir', NO_ARGS);
    const dir = await objAt(d, '/dir');
    await d.put!(dir, Readable.from([Buffer.from('hello')]), { name: 'f.txt', size: 5 });
    expect((await d.list(dir, NO_ARGS)).map((o) => o.name)).toEqual(['f.txt']);
    expect((await readAll(d, '/dir/f.txt')).toString()).toBe('hello');
    await d.remove!(await objAt(d, '/dir/f.txt'), NO_ARGS);
    await d.drop();
    expect(def.options.map((o) => o.name).filter((n) => !read.has(n))).toEqual([]);
  });
});

describe('driver templates', () => {
  it("a driver's config.alert is empty or AList's `<status>|<text>` (the admin page shows an Alert of that status)", async () => {
    // AList's front end (storages/AddOrEdit.tsx) takes alert.split('|')[0] as the hope-ui Alert
    // status; a bare text there is no status at all.
    const list = await ts.api<Record<string, { config: { alert: string } }>>('/api/admin/driver/list', { token: admin });
    ok(list);
    const alerts = Object.entries(list.data!).map(([name, t]) => [name, t.config.alert] as const).filter(([, a]) => a !== '');
    expect(alerts.length).toBeGreaterThan(0); // Memory warns that its files live in RAM
    for (const [name, alert] of alerts) expect(alert, name).toMatch(/^(info|success|warning|danger)\|\S/);
    const info = await ts.api<{ config: { alert: string } }>('/api/admin/driver/info?driver=Memory', { token: admin });
    expect(info.data!.config.alert).toBe(list.data!.Memory!.config.alert);
  });
});
