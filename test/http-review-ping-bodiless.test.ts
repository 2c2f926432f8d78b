/**
 * A code review of the HTTP layer (src/server.ts, protocols/rest/app.ts), each defect proven here
 * against a real server over loopback.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { rawExchange } from './clients/raw-http.js';

let s: TestServer;

beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.close();
});

const raw = (data: string) => rawExchange(s.url, data);

describe('ANY /ping answers `pong` whatever body it carries (alist-compat §5)', () => {
  const bodies: Array<[string, string]> = [
    ['text/plain', 'hello'],
    ['application/json', '{not json'],
    ['application/x-www-form-urlencoded', '[1'],
  ];
  for (const [type, body] of bodies) {
    it(`POST /ping with a ${type} body that is not JSON`, async () => {
      const res = await fetch(s.url + '/ping', { method: 'POST', headers: { 'content-type': type }, body });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await res.text()).toBe('pong');
    });
  }

  it('a body is skipped, and the keep-alive connection serves the next request', async () => {
    const ping = (extra: string, body: string) =>
      `POST /ping HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n${extra}\r\n${body}`;
    const r = await raw(ping('', '{"a":') + ping('Connection: close\r\n', 'xyz'));
    const answers = r.split(/(?=HTTP\/1\.1 )/);
    expect(answers).toHaveLength(2);
    for (const a of answers) expect(a).toMatch(/^HTTP\/1\.1 200 [^]*\r\n\r\npong$/);
  });
});

/** The status line and header block of one request on its own connection (Connection: close). */
async function head(lines: string[]): Promise<{ status: number; headers: string; rest: string }> {
  const r = await raw([...lines, 'Connection: close', '', ''].join('\r\n'));
  const end = r.indexOf('\r\n\r\n');
  return { status: Number(r.slice(9, 12)), headers: r.slice(0, end).toLowerCase(), rest: r.slice(end + 4) };
}

describe('204 and 304 answers carry no Content-Length (RFC 9110 §8.6: a server must not send one)', () => {
  const basic = 'Basic ' + Buffer.from('admin:admin-test-password').toString('base64');

  it('a CORS preflight (204)', async () => {
    const r = await head(['OPTIONS /api/fs/list HTTP/1.1', 'Host: x', 'Origin: http://app.example', 'Access-Control-Request-Method: POST']);
    expect(r.status).toBe(204);
    expect(r.headers).toContain('access-control-allow-origin: *');
    expect(r.headers).not.toContain('content-length');
  });

  it('a WebDAV DELETE (204), and the keep-alive connection still frames the next request', async () => {
    await fetch(s.url + '/dav/gone.txt', { method: 'PUT', headers: { authorization: basic }, body: 'x' });
    const r = await raw(`DELETE /dav/gone.txt HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic}\r\n\r\nGET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    const [first, second] = r.split(/(?=HTTP\/1\.1 )/);
    expect(first).toMatch(/^HTTP\/1\.1 204 /);
    expect(first!.toLowerCase()).not.toContain('content-length');
    expect(second).toMatch(/^HTTP\/1\.1 200 [^]*\r\n\r\npong$/);
  });

  it('a WebDAV conditional GET (304): no Content-Length of 0 for a file that is not empty', async () => {
    await fetch(s.url + '/dav/kept.txt', { method: 'PUT', headers: { authorization: basic }, body: 'eight by' });
    const r = await head(['GET /dav/kept.txt HTTP/1.1', 'Host: x', `Authorization: ${basic}`, 'If-None-Match: *']);
    expect(r.status).toBe(304);
    expect(r.headers).toContain('etag:');
    expect(r.headers).not.toContain('content-length');
    expect(r.rest).toBe('');
  });
});
