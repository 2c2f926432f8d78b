/**
 * Helpers for the REST file-system tests: users with chosen permission bits, meta rules, raw
 * uploads and downloads over loopback. Everything goes through the real server's HTTP API.
 */
import { expect } from 'vitest';
import { request } from 'node:http';
import { startTestServer, type TestServer } from './harness.js';

export const PERM = {
  SEE_HIDDEN: 1, NO_PASSWORD: 2, WRITE: 8, RENAME: 16, MOVE: 32, COPY: 64, REMOVE: 128,
  WEBDAV_READ: 256, WEBDAV_MANAGE: 512, SFTP_READ: 1024, SFTP_MANAGE: 2048,
} as const;
export const ALL_FS = PERM.WRITE | PERM.RENAME | PERM.MOVE | PERM.COPY | PERM.REMOVE;

/** Assert an envelope's code (and message when given), showing the whole envelope on failure. */
export function expectCode(env: { code: number; message: string }, code: number, message?: string): void {
  expect({ code: env.code, message: message === undefined ? undefined : env.message }).toEqual({ code, message });
}

export function ok(env: { code: number; message: string }): void {
  expectCode(env, 200, 'success');
}

/** Create a general user and log in as them; returns their token. */
export async function makeUser(ts: TestServer, admin: string, username: string, permission: number, basePath = '/'): Promise<string> {
  const password = `pw-${username}-123`;
  ok(await ts.api('/api/admin/user/create', { token: admin, body: { username, password, permission, base_path: basePath, role: 0 } }));
  return ts.login(username, password);
}

export interface MetaBody {
  path: string;
  password?: string;
  p_sub?: boolean;
  write?: boolean;
  w_sub?: boolean;
  hide?: string;
  h_sub?: boolean;
  readme?: string;
  r_sub?: boolean;
}

export async function addMeta(ts: TestServer, admin: string, m: MetaBody): Promise<void> {
  ok(
    await ts.api('/api/admin/meta/create', {
      token: admin,
      body: { id: 0, password: '', p_sub: false, write: false, w_sub: false, hide: '', h_sub: false, readme: '', r_sub: false, ...m },
    }),
  );
}

/** PUT /api/fs/put with a buffer body; returns the envelope. */
export async function putFile(ts: TestServer, token: string, path: string, body: string | Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(ts.url + '/api/fs/put', {
    method: 'PUT',
    headers: { authorization: token, 'file-path': encodeURIComponent(path), 'content-type': 'application/octet-stream', ...headers },
    body: typeof body === 'string' ? Buffer.from(body) : body,
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { code: number; message: string; data: unknown };
}

/** Admin helper: upload and assert success. */
export async function seed(ts: TestServer, admin: string, files: Record<string, string>): Promise<void> {
  for (const [p, body] of Object.entries(files)) ok(await putFile(ts, admin, p, body));
}

export async function mkdir(ts: TestServer, token: string, path: string) {
  return ts.api('/api/fs/mkdir', { token, body: { path } });
}

export interface ListData {
  content: Array<{ name: string; is_dir: boolean; size: number; sign: string; type: number }>;
  total: number;
  readme: string;
  header: string;
  write: boolean;
  provider: string;
}

export async function list(ts: TestServer, token: string, path: string, extra: Record<string, unknown> = {}) {
  return ts.api<ListData>('/api/fs/list', { token, body: { path, ...extra } });
}

export async function names(ts: TestServer, token: string, path: string): Promise<string[]> {
  const r = await list(ts, token, path);
  ok(r);
  return r.data!.content.map((e) => e.name).sort();
}

/** A raw HTTP request (no URL normalisation by fetch: `..` and odd escapes reach the server as written). */
export function rawRequest(
  ts: TestServer, method: string, path: string, headers: Record<string, string> = {}, body?: Buffer,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  const u = new URL(ts.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A server for REST-only tests (SFTP off: these files test nothing over SSH). */
export function startRestServer(env: Record<string, string> = {}): Promise<TestServer> {
  return startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false', ...env } });
}
