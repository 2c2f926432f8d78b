/**
 * Lifecycle review: storage changes racing each other, and a start that must survive a damaged
 * search index (derived data in DATA) instead of exiting after its ready line.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { ok } from './fs-helpers.js';
import { cliEnv, startServerProcess, tempDataDirs, type ServerProcess } from './clients/process.js';

const PASSWORD = 'review-life-Secret1';

describe('storage changes racing each other', () => {
  let s: TestServer;
  let admin: string;
  let root: string;
  beforeAll(async () => {
    s = await startTestServer();
    admin = await s.login();
    root = await mkdtemp(join(tmpdir(), 'treegate-life-'));
    await writeFile(join(root, 'f.txt'), 'x');
  });
  afterAll(async () => {
    await s.close();
    await rm(s.dataDir, { recursive: true, force: true });
    await rm(root, { recursive: true, force: true });
  });

  it('an update racing a delete never leaves the deleted storage served', async () => {
    for (let i = 0; i < 10; i++) {
      const mp = `/race${i}`;
      const c = await s.api<{ id: number }>('/api/admin/storage/create', {
        token: admin, body: { mount_path: mp, driver: 'Local', addition: JSON.stringify({ root_folder_path: root }) },
      });
      ok(c);
      const id = c.data!.id;
      const rec = (await s.api<Record<string, unknown>>(`/api/admin/storage/get?id=${id}`, { token: admin })).data!;
      const [, del] = await Promise.all([
        s.api('/api/admin/storage/update', { token: admin, body: { ...rec, remark: `edit ${i}` } }),
        s.api(`/api/admin/storage/delete?id=${id}`, { token: admin, method: 'POST' }),
      ]);
      ok(del);
      const rows = (await s.api<{ content: Array<{ id: number }> }>('/api/admin/storage/list', { token: admin })).data!.content;
      expect(rows.some((r) => r.id === id)).toBe(false);
      // Deleted: its path is no longer served (the update's mount used to land after the delete's unmount).
      const listed = await s.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token: admin, body: { path: mp } });
      expect(`${i}: ${listed.code} ${listed.message}`).toBe(`${i}: 500 object not found`);
    }
  });

  it('requests to a storage being edited wait for it, never fall through to the storage above', async () => {
    // With search on, Local storages are watched; an edit first stops the old instance's watch
    // (its scan of the tree), and meanwhile `/big` used to belong to the Local storage at `/`.
    ok(await s.api('/api/admin/setting/save', { token: admin, body: [{ key: 'search_index', value: 'database' }] }));
    ok(await s.api('/api/admin/index/progress', { token: admin })); // opens the index now
    const big = await mkdtemp(join(tmpdir(), 'treegate-life-big-'));
    await writeFile(join(big, 'f.txt'), 'x');
    for (let i = 0; i < 20; i++) await Promise.all(Array.from({ length: 50 }, (_, j) => mkdir(join(big, `d${i}`, `e${j}`), { recursive: true })));
    const c = await s.api<{ id: number }>('/api/admin/storage/create', {
      token: admin, body: { mount_path: '/big', driver: 'Local', addition: JSON.stringify({ root_folder_path: big }) },
    });
    ok(c);
    const rec = (await s.api<Record<string, unknown>>(`/api/admin/storage/get?id=${c.data!.id}`, { token: admin })).data!;
    const seen = new Map<string, number>();
    try {
      for (let k = 0; k < 10; k++) {
        let done = false;
        const edit = s.api('/api/admin/storage/update', { token: admin, body: { ...rec, remark: `edit ${k}` } }).then((r) => ((done = true), r));
        // Readers on 16 connections for as long as the edit runs.
        await Promise.all(Array.from({ length: 16 }, async () => {
          for (let n = 0; !done && n < 500; n++) {
            const r = await s.api('/api/fs/get', { token: admin, body: { path: '/big/f.txt' } });
            seen.set(`${r.code} ${r.message}`, (seen.get(`${r.code} ${r.message}`) ?? 0) + 1);
          }
        }));
        ok(await edit);
      }
    } finally {
      ok(await s.api(`/api/admin/storage/delete?id=${c.data!.id}`, { token: admin, method: 'POST' }));
      ok(await s.api('/api/admin/setting/save', { token: admin, body: [{ key: 'search_index', value: 'none' }] }));
      await rm(big, { recursive: true, force: true });
    }
    expect([...seen.keys()]).toEqual(['200 success']);
  });
});

describe('a start with a damaged search index', () => {
  const dirs = tempDataDirs('treegate-life-');
  const procs: ServerProcess[] = [];
  afterEach(async () => {
    for (const p of procs.splice(0)) if (p.child.exitCode === null) p.child.kill('SIGKILL');
    await dirs.cleanup();
  });

  const start = async (data: string) => {
    const p = await startServerProcess(['--data', data], cliEnv({ TREEGATE_ADMIN_PASSWORD: PASSWORD }));
    procs.push(p);
    return p;
  };
  const call = async <T>(p: ServerProcess, path: string, body: unknown, token?: string) => {
    const res = await fetch(`http://127.0.0.1:${p.http}${path}`, {
      method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: token } : {}) }, body: JSON.stringify(body),
    });
    return (await res.json()) as { code: number; message: string; data: T };
  };
  const login = async (p: ServerProcess) => (await call<{ token: string }>(p, '/api/auth/login', { username: 'admin', password: PASSWORD })).data.token;
  const search = (p: ServerProcess, token: string) =>
    call<{ content: Array<{ name: string }> }>(p, '/api/fs/search', { parent: '/', keywords: 'needle', scope: 0, page: 1, per_page: 10, password: '' }, token);

  /** A first run with search on, stopped; then `damage` is done to DATA and the server started again. */
  async function restartWith(damage: (data: string) => Promise<void>): Promise<{ p: ServerProcess; token: string }> {
    const data = await dirs.next();
    const first = await start(data);
    const token = await login(first);
    ok(await call(first, '/api/admin/setting/save', [{ key: 'search_index', value: 'database' }], token));
    await writeFile(join(data, 'storage', 'needle.txt'), 'n');
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    await damage(data);
    const p = await start(data);
    return { p, token: await login(p) };
  }

  /** Polls (bounded) while the process runs; returns the last answer. */
  async function untilFound(p: ServerProcess, token: string) {
    let last = await search(p, token);
    for (let i = 0; i < 100 && !last.data?.content?.some((h) => h.name === 'needle.txt'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      if (p.child.exitCode !== null) break;
      if (i % 10 === 0) await call(p, '/api/admin/index/build', {}, token);
      last = await search(p, token);
    }
    return last;
  }

  it('a search.db that is no database (zeroed by a power cut) is rebuilt; the server keeps running', async () => {
    const { p, token } = await restartWith(async (data) => {
      await writeFile(join(data, 'search.db'), Buffer.alloc(16384, 0));
      await rm(join(data, 'search.db-wal'), { force: true });
      await rm(join(data, 'search.db-shm'), { force: true });
    });
    const found = await untilFound(p, token);
    expect(p.child.exitCode, p.output()).toBe(null);
    expect(found.data.content.map((h) => h.name)).toContain('needle.txt');
  });

  it('a search.db that cannot be opened leaves search unavailable, not the server down', async () => {
    const { p, token } = await restartWith(async (data) => {
      await rm(join(data, 'search.db'), { force: true });
      await mkdir(join(data, 'search.db')); // EISDIR, as EACCES for a file root left behind
    });
    // The background check re-runs every 3 s: the server is still up after two of them.
    await new Promise((r) => setTimeout(r, 7000));
    expect(p.child.exitCode, p.output()).toBe(null);
    const r = await search(p, token);
    expect(`${r.code} ${r.message}`).toBe('500 search not available');
    expect(p.output()).toContain('search index: cannot open search.db');
  });
});
