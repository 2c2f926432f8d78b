/**
 * Cross-origin browser access (the `cors` config): by default, as AList, pages of any origin may
 * call /api, /d, /p and /dav; a list of origins allows only those; an empty list turns it off.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';

const APP = 'https://app.example';

/** A server whose DATA/config.json holds `cors`. */
async function serverWith(cors: Record<string, string[]>): Promise<TestServer> {
  const dataDir = await mkdtemp(join(tmpdir(), 'tg-cors-'));
  await writeFile(join(dataDir, 'config.json'), JSON.stringify({ cors }));
  const s = await startTestServer({ dataDir });
  const close = s.close;
  // The harness removes only the DATA folders it made itself.
  return Object.assign(s, { close: async () => (await close(), await rm(dataDir, { recursive: true, force: true })) });
}

function preflight(s: TestServer, path: string, origin: string, method = 'POST', headers = 'authorization,content-type'): Promise<Response> {
  return fetch(s.url + path, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  });
}

describe('default (AList\'s): every origin', () => {
  let s: TestServer;
  beforeAll(async () => (s = await startTestServer()));
  afterAll(() => s?.close());

  it('answers a preflight with the method and headers asked for (a literal * would not cover Authorization)', async () => {
    const r = await preflight(s, '/api/fs/list', APP);
    expect(r.status).toBe(204);
    expect(r.headers.get('access-control-allow-origin')).toBe('*');
    expect(r.headers.get('access-control-allow-methods')).toBe('POST');
    expect(r.headers.get('access-control-allow-headers')).toBe('authorization,content-type');
    expect(r.headers.get('access-control-max-age')).toBe('43200');
  });

  it('marks API answers and downloads for other origins', async () => {
    const token = await s.login();
    const api = await fetch(`${s.url}/api/fs/list`, {
      method: 'POST', headers: { origin: APP, authorization: token, 'content-type': 'application/json' }, body: JSON.stringify({ path: '/' }),
    });
    expect(await api.json()).toMatchObject({ code: 200 });
    expect(api.headers.get('access-control-allow-origin')).toBe('*');
    const ping = await fetch(`${s.url}/ping`, { headers: { origin: APP } });
    expect(ping.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('WebDAV: a preflight is answered, a plain OPTIONS still reaches the WebDAV server', async () => {
    const r = await preflight(s, '/dav/', APP, 'PROPFIND', 'authorization,depth');
    expect(r.status).toBe(204);
    expect(r.headers.get('access-control-allow-methods')).toBe('PROPFIND');
    const plain = await fetch(`${s.url}/dav/`, { method: 'OPTIONS' });
    expect(plain.headers.get('dav')).toMatch(/\b1\b.*\b2\b/);
    expect(plain.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('a request without Origin gets no CORS headers', async () => {
    const r = await fetch(`${s.url}/ping`);
    expect(r.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('a list of origins', () => {
  let s: TestServer;
  beforeAll(async () => (s = await serverWith({ allow_origins: [APP], allow_methods: ['GET', 'POST'], allow_headers: ['Authorization', 'Content-Type'] })));
  afterAll(() => s?.close());

  it('echoes an allowed origin (Vary: Origin) with the configured methods and headers', async () => {
    const r = await preflight(s, '/api/fs/list', APP);
    expect(r.status).toBe(204);
    expect(r.headers.get('access-control-allow-origin')).toBe(APP);
    expect(r.headers.get('vary')).toBe('Origin');
    expect(r.headers.get('access-control-allow-methods')).toBe('GET, POST');
    expect(r.headers.get('access-control-allow-headers')).toBe('Authorization, Content-Type');
  });

  it('refuses another origin\'s preflight (403) and does not mark its requests', async () => {
    const r = await preflight(s, '/api/fs/list', 'https://evil.example');
    expect(r.status).toBe(403);
    expect(r.headers.get('access-control-allow-origin')).toBeNull();
    const ping = await fetch(`${s.url}/ping`, { headers: { origin: 'https://evil.example' } });
    expect(await ping.text()).toBe('pong');
    expect(ping.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('allow_origins [] (off)', () => {
  let s: TestServer;
  beforeAll(async () => (s = await serverWith({ allow_origins: [] })));
  afterAll(() => s?.close());

  it('adds nothing and answers no preflight itself', async () => {
    const r = await preflight(s, '/api/fs/list', APP);
    expect(r.status).not.toBe(204);
    expect(r.headers.get('access-control-allow-origin')).toBeNull();
  });
});
