/**
 * The WebDav driver against treegate's own /dav. A storage that mounts the very server it runs in
 * (whatever host name or path it uses) is refused at init with a clear status, because each server
 * process sends its random instance id and /dav answers its own id with 508 Loop Detected. A second
 * treegate's /dav is an ordinary remote: it mounts and passes the whole conformance suite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { list, names, ok, putFile, startRestServer } from './fs-helpers.js';
import { parseOptions } from '../drivers/options.js';
import { runConformance } from '../drivers/conformance/suite.js';
import { webdavDefinition } from '../drivers/webdav/index.js';
import { INSTANCE_HEADER, type DriverDefinition } from '../drivers/types.js';

const def = webdavDefinition as unknown as DriverDefinition;

let a: TestServer;
let b: TestServer;
let adminA: string;
let adminB: string;

beforeAll(async () => {
  [a, b] = await Promise.all([startRestServer(), startRestServer()]);
  [adminA, adminB] = await Promise.all([a.login(), b.login()]);
}, 30_000);
afterAll(async () => {
  await Promise.allSettled([a?.close(), b?.close()]);
});

const davStorage = (mount_path: string, address: string) =>
  a.api<{ id: number }>('/api/admin/storage/create', {
    token: adminA,
    body: { mount_path, driver: 'WebDav', cache_expiration: 0, addition: JSON.stringify({ address, username: 'admin', password: ADMIN_PASSWORD }) },
  });

describe('WebDav storage pointing at treegate itself', () => {
  it.each([
    ['the same host:port', (s: TestServer) => `${s.url}/dav`],
    ['another name for the same server', (s: TestServer) => `${s.url.replace('127.0.0.1', 'localhost')}/dav/`],
    ['a path inside one of its own mounts', (s: TestServer) => `${s.url}/dav/inner`],
  ])('is refused at init with a clear status: %s', async (_what, address) => {
    if (address(a).includes('/inner')) ok(await a.api('/api/fs/mkdir', { token: adminA, body: { path: '/inner' } }));
    const mount = `/self-${Math.random().toString(36).slice(2, 8)}`;
    const t0 = Date.now();
    const r = await davStorage(mount, address(a));
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(r.code).toBe(500);
    expect(r.message).toMatch(/leads back to this treegate itself \(508 Loop Detected\)/);
    const got = await a.api<{ status: string }>(`/api/admin/storage/get?id=${(r.data as { id: number }).id}`, { token: adminA });
    expect(got.data!.status).toMatch(/508 Loop Detected/);
    expect((await list(a, adminA, mount)).message).toMatch(/508 Loop Detected/);
  });

  it('only the own instance id is refused: a plain client and another id are served', async () => {
    const auth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
    const plain = await fetch(`${a.url}/dav/`, { method: 'PROPFIND', headers: { authorization: auth, depth: '0' } });
    expect(plain.status).toBe(207);
    const other = await fetch(`${a.url}/dav/`, { method: 'PROPFIND', headers: { authorization: auth, depth: '0', [INSTANCE_HEADER]: 'someone-else' } });
    expect(other.status).toBe(207);
    const own = await fetch(`${a.url}/dav/`, { method: 'PROPFIND', headers: { authorization: auth, depth: '0', [INSTANCE_HEADER]: a.running.core.instanceId } });
    expect(own.status).toBe(508);
  });
});

describe("WebDav storage on a second treegate's /dav", () => {
  it('mounts, and reads and writes go through to the other server', async () => {
    ok(await davStorage('/remote', `${b.url}/dav`));
    ok(await putFile(a, adminA, '/remote/from-a/hello.txt', 'written through A'));
    expect(await names(b, adminB, '/from-a')).toEqual(['hello.txt']);
    ok(await putFile(b, adminB, '/from-b.txt', 'written on B'));
    expect(await names(a, adminA, '/remote')).toEqual(expect.arrayContaining(['from-a', 'from-b.txt']));
    const got = await a.api<{ raw_url: string }>('/api/fs/get', { token: adminA, body: { path: '/remote/from-b.txt' } });
    ok(got);
    expect(await (await fetch(got.data!.raw_url)).text()).toBe('written on B');
  });

  runConformance(def, async () => {
    ok(await b.api('/api/fs/mkdir', { token: adminB, body: { path: '/conformance' } }));
    return {
      options: parseOptions(def, { address: `${b.url}/dav/conformance`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/' }),
      cleanup: async () => undefined,
    };
  });
});
