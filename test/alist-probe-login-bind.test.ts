/**
 * Login binds its fields as gin's ShouldBind does (server/handles/auth.go `Login`/`LoginHash`:
 * `c.ShouldBind(&req)`). For a POST without a content type gin picks the form binding, which reads
 * `req.Form`, and Go's `req.Form` holds the URL query values too. So
 * `curl -X POST 'http://host/api/auth/login?username=admin&password=...'` logs in on AList.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { startRestServer } from './fs-helpers.js';

let ts: TestServer;
beforeAll(async () => {
  ts = await startRestServer();
});
afterAll(async () => ts?.close());

const post = async (path: string) => {
  const res = await fetch(ts.url + path, { method: 'POST' });
  expect(res.status).toBe(200);
  return (await res.json()) as { code: number; message: string; data: { token?: string } | null };
};

describe('login fields from the query string (POST, no body)', () => {
  it('/api/auth/login takes username and plain password from the query', async () => {
    const r = await post(`/api/auth/login?username=admin&password=${encodeURIComponent(ADMIN_PASSWORD)}`);
    expect(r.code).toBe(200);
    expect(typeof r.data?.token).toBe('string');
  });

  it('/api/auth/login/hash takes the static hash from the query; a wrong one is AList\'s 400', async () => {
    const hash = createHash('sha256').update(`${ADMIN_PASSWORD}-https://github.com/alist-org/alist`).digest('hex');
    const r = await post(`/api/auth/login/hash?username=admin&password=${hash}`);
    expect(r.code).toBe(200);
    expect(typeof r.data?.token).toBe('string');
    expect(await post('/api/auth/login/hash?username=admin&password=nope')).toMatchObject({ code: 400, message: 'password is incorrect' });
  });
});
