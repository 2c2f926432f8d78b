/**
 * POST /api/fs/link: the admin-only "real link" endpoint proxy programs call (AList 3.x
 * server/router.go `_fs`: `g.POST("/link", middlewares.AuthAdmin, handles.Link)`;
 * server/handles/fsmanage.go `Link`). Facts from that source:
 * - admin role required: other users get 403 `You are not an admin` (middlewares.AuthAdmin);
 * - body `{path}` (MkdirOrLinkReq), the full tree path, never joined to a base path;
 * - a storage whose driver is only_local (Local) answers model.Link `{url: "<api_url>/p<escaped
 *   path>?d&sign=<sign>", header: null}`: always signed, `d` so /p streams instead of redirecting
 *   to down_proxy_url; other drivers answer the driver's own link (url + the headers it needs).
 * - errors are envelopes with code 500. AList's only_local branch does not look at the path, so it
 *   would hand out a /p link for a folder too; treegate answers the error the link would give
 *   (decision 3: never looser), which is what the folder test checks.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ALL_FS, expectCode, makeUser, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  await seed(ts, admin, { '/lk/movie one.mp4': 'movie-bytes', '/lk/sub/x.txt': 'x' });
});
afterAll(async () => ts?.close());

interface LinkData { url: string; header: Record<string, string[]> | null }

describe('POST /api/fs/link', () => {
  it('answers a /p link with ?d&sign= for a Local (only_local) file, which serves the bytes without auth', async () => {
    const r = await ts.api<LinkData>('/api/fs/link', { token: admin, body: { path: '/lk/movie one.mp4' } });
    expectCode(r, 200, 'success');
    const url = new URL(r.data!.url);
    expect(`${url.origin}${url.pathname}`).toBe(`${ts.url}/p/lk/movie%20one.mp4`);
    expect(url.searchParams.has('d')).toBe(true);
    expect(url.searchParams.get('sign')).toMatch(/^[A-Za-z0-9_-]{43}=:0$/);
    expect(r.data!.header).toBeNull();
    const res = await fetch(r.data!.url);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('movie-bytes');
  });

  it('is admin only: another user gets 403 You are not an admin', async () => {
    const u = await makeUser(ts, admin, 'linker', ALL_FS);
    expectCode(await ts.api('/api/fs/link', { token: u, body: { path: '/lk/movie one.mp4' } }), 403, 'You are not an admin');
  });

  it('a folder is a 500 error envelope, not a link', async () => {
    const r = await ts.api('/api/fs/link', { token: admin, body: { path: '/lk/sub' } });
    expect(r.code).toBe(500);
    expect(r.data).toBeNull();
  });
});
