/**
 * Review of AList's `.balance` groups (src/vfs/balance.ts) and Local thumbnails (drivers/local/thumbs.ts)
 * with real clients: what mirrors of the tree (search index, WebDAV locks) hold of a group, which member
 * serves a /d download when signs are per storage, and a member still initialising. Thumbnails were
 * probed (escaped URLs, HEAD, /p, folders, aborts, a cache folder in the root) and found sound.
 */
import { mkdtemp, mkdir as mkdirHost, writeFile } from 'node:fs/promises';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWith } from '../src/sign.js';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { until } from './tasks-helpers.js';

let ts: TestServer;
let admin: string;

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'search_index', value: 'database' }] }));
}, 30_000);
afterAll(async () => ts?.close());

/** A Local storage at `mount` whose folder holds `files`; returns its id and host folder. */
async function local(mount: string, files: Record<string, string>, extra: Record<string, unknown> = {}): Promise<{ id: number; root: string }> {
  const root = await mkdtemp(join(tmpdir(), 'treegate-review-balance-'));
  for (const [name, body] of Object.entries(files)) await writeFile(join(root, name), body);
  const r = await ts.api<{ id: number }>('/api/admin/storage/create', {
    token: admin, body: { mount_path: mount, driver: 'Local', addition: JSON.stringify({ root_folder_path: root }), ...extra },
  });
  ok(r);
  return { id: r.data!.id, root };
}

async function found(keywords: string): Promise<string[]> {
  const r = await ts.api<{ content: Array<{ parent: string; name: string }> }>('/api/fs/search', {
    token: admin, body: { parent: '/', keywords, scope: 0, page: 1, per_page: 100 },
  });
  ok(r);
  return r.data!.content.map((h) => `${h.parent}/${h.name}`).sort();
}

async function build(): Promise<void> {
  ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
  await until('the index job', async () => ((await ts.api<{ is_done: boolean }>('/api/admin/index/progress', { token: admin })).data?.is_done ? true : undefined), 30_000, 50);
}

async function download(path: string): Promise<string> {
  const res = await fetch(`${ts.url}/d${path}?sign=${signWith(ts.running.core.settings.get('token'), path, 0)}`);
  expect(res.status).toBe(200);
  return res.text();
}

describe('a .balance group in the search index', () => {
  it('is indexed once at its tree path; disabling the primary keeps its files found while the other member serves them', async () => {
    const a = await local('/zgrp', { 'zq-grp.txt': 'A' });
    await local('/zgrp.balance1', { 'zq-grp.txt': 'B' });
    await build();
    expect(await found('zq-grp')).toEqual(['/zgrp/zq-grp.txt']);
    ok(await ts.api(`/api/admin/storage/disable?id=${a.id}`, { token: admin, method: 'POST' }));
    // The folder is still served, by the other member.
    expect(await download('/zgrp/zq-grp.txt')).toBe('B');
    expect(await found('zq-grp')).toEqual(['/zgrp/zq-grp.txt']);
  });

  it('deleting the primary keeps the rows of the folder the other member still serves', async () => {
    const a = await local('/zdel', { 'zq-del.txt': 'A' });
    await local('/zdel.balance1', { 'zq-del.txt': 'B' });
    await build();
    expect(await found('zq-del')).toEqual(['/zdel/zq-del.txt']);
    ok(await ts.api(`/api/admin/storage/delete?id=${a.id}`, { token: admin, method: 'POST' }));
    expect(await download('/zdel/zq-del.txt')).toBe('B');
    expect(await found('zq-del')).toEqual(['/zdel/zq-del.txt']);
  });

  it("a group mounted over a folder of the root storage drops that folder's rows, as a plain mount does", async () => {
    const storages = await ts.api<{ content: Array<{ mount_path: string; addition: string }> }>('/api/admin/storage/list', { token: admin });
    ok(storages);
    const rootHost = (JSON.parse(storages.data!.content.find((s) => s.mount_path === '/')!.addition) as { root_folder_path: string }).root_folder_path;
    await mkdirHost(join(rootHost, 'zover'));
    await writeFile(join(rootHost, 'zover', 'zq-under.txt'), 'root');
    await build();
    expect(await found('zq-under')).toEqual(['/zover/zq-under.txt']);
    await local('/zover.balance1', { 'zq-new.txt': 'N' });
    // The root storage's file is not served at /zover any more.
    const got = await ts.api('/api/fs/get', { token: admin, body: { path: '/zover/zq-under.txt' } });
    expect(got.code).not.toBe(200);
    expect(await found('zq-under')).toEqual([]);
  });
});

describe('a .balance group and WebDAV locks', () => {
  it("deleting the group's primary leaves the locks on the files the other member still serves", async () => {
    const a = await local('/zlk', { 'f.txt': 'A' });
    await local('/zlk.balance1', { 'f.txt': 'B' });
    const auth = { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64') };
    const body = '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>' +
      '<D:locktype><D:write/></D:locktype><D:owner>t</D:owner></D:lockinfo>';
    const lock = await fetch(`${ts.url}/dav/zlk/f.txt`, { method: 'LOCK', headers: { ...auth, 'content-type': 'application/xml' }, body });
    expect(lock.status).toBe(200);
    ok(await ts.api(`/api/admin/storage/delete?id=${a.id}`, { token: admin, method: 'POST' }));
    // /zlk/f.txt is still served (by the other member, now the one writes go to) and still locked.
    const put = await fetch(`${ts.url}/dav/zlk/f.txt`, { method: 'PUT', headers: auth, body: 'overwritten' });
    expect(put.status).toBe(423);
  });
});

describe('a .balance group behind per-storage signs', () => {
  it('with sign_all off and enable_sign on, /d downloads still take turns between two members', async () => {
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'sign_all', value: 'false' }] }));
    try {
      await local('/zsig', { 'same.txt': 'A' }, { enable_sign: true });
      await local('/zsig.balance1', { 'same.txt': 'B' }, { enable_sign: true });
      const got: string[] = [];
      for (let i = 0; i < 4; i++) got.push(await download('/zsig/same.txt'));
      expect([...got].sort()).toEqual(['A', 'A', 'B', 'B']);
    } finally {
      ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'sign_all', value: 'true' }] }));
    }
  });
});

describe('a .balance member still initialising', () => {
  it('holds up no read the working members can serve', async () => {
    const remote = await startRestServer();
    // A TCP gate in front of the remote: connections wait until it opens, so the member's init waits too.
    const held: Socket[] = [];
    let open = false;
    const pipeUp = (c: Socket) => {
      const up = connect(Number(new URL(remote.url).port), '127.0.0.1');
      up.on('error', () => c.destroy());
      c.on('error', () => up.destroy());
      c.pipe(up).pipe(c);
    };
    const gate = createServer((c) => (open ? pipeUp(c) : held.push(c)));
    await new Promise<void>((r) => gate.listen(0, '127.0.0.1', () => r()));
    try {
      const remoteAdmin = await remote.login();
      ok(await remote.api('/api/fs/mkdir', { token: remoteAdmin, body: { path: '/mirror' } }));
      ok(await putFile(remote, remoteAdmin, '/mirror/same.txt', 'R'));
      await local('/zslow', { 'same.txt': 'A' });
      const port = (gate.address() as { port: number }).port;
      const addition = { address: `http://127.0.0.1:${port}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/mirror' };
      const creating = ts.api('/api/admin/storage/create', {
        token: admin, body: { mount_path: '/zslow.balance1', driver: 'WebDav', addition: JSON.stringify(addition) },
      });
      await until('the new member\'s init reaching the remote', async () => (held.length ? true : undefined), 15_000, 20);
      // Served by the member that works, while the other one is still being set up.
      expect(await download('/zslow/same.txt')).toBe('A');
      open = true;
      for (const c of held.splice(0)) pipeUp(c);
      // Its init was not timed out waiting for the download above.
      ok(await creating);
      const got = new Set<string>();
      for (let i = 0; i < 2; i++) got.add(await download('/zslow/same.txt'));
      expect([...got].sort()).toEqual(['A', 'R']);
    } finally {
      for (const c of held) c.destroy();
      gate.close();
      await remote.close();
    }
  }, 60_000);
});
