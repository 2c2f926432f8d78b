/**
 * `Expect: 100-continue` (protocols/expect-continue.ts): a refused upload gets its final status
 * without `100 Continue`, so the client never sends the body; an accepted one gets 100 first.
 * Spoken over a raw socket, as curl does for bodies over 1 MiB, to see every byte the server sends.
 */
import { readFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';

let s: TestServer;
let token: string;
const BODY = Buffer.alloc(2 * 1024 * 1024, 'z');

beforeAll(async () => {
  s = await startTestServer();
  token = await s.login();
});
afterAll(async () => {
  await s?.close();
});

/** A raw HTTP/1.1 exchange: send the head, collect what the server says, end the body on demand. */
function exchange(head: string) {
  const sock: Socket = connect(Number(new URL(s.url).port), '127.0.0.1');
  let got = '';
  const waiters: Array<() => void> = [];
  const closed = new Promise<void>((r) => sock.once('close', () => r()));
  sock.on('data', (b: Buffer) => {
    got += b.toString('latin1');
    for (const w of waiters.splice(0)) w();
  });
  sock.on('error', () => undefined);
  sock.write(head + '\r\n');
  return {
    /** Resolves once the server has said something matching `re`. */
    until: (re: RegExp) =>
      new Promise<string>((resolve, reject) => {
        const check = () => (re.test(got) ? resolve(got) : waiters.push(check));
        void closed.then(() => (re.test(got) ? resolve(got) : reject(new Error(`closed after: ${got}`))));
        check();
      }),
    sendBody: () => sock.write(BODY),
    closed,
    text: () => got,
  };
}

const basic = (user: string, pass: string) => 'Basic ' + Buffer.from(`${user}:${pass}`).toString('base64');
const headOf = (method: string, path: string, headers: Record<string, string>) =>
  [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', `Content-Length: ${BODY.length}`, 'Expect: 100-continue', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), ''].join('\r\n');

describe('WebDAV PUT with Expect: 100-continue', () => {
  it('a wrong password gets 401 without 100 Continue, and the connection ends', async () => {
    const x = exchange(headOf('PUT', '/dav/refused.bin', { Authorization: basic('admin', 'wrong-password') }));
    const said = await x.until(/\r\n\r\n/);
    expect(said).toMatch(/^HTTP\/1\.1 401 /);
    expect(said).not.toMatch(/100 Continue/);
    await x.closed;
    expect(x.text()).not.toMatch(/100 Continue/);
  });

  it('a missing parent folder gets 409 without 100 Continue', async () => {
    const x = exchange(headOf('PUT', '/dav/no-such-folder/f.bin', { Authorization: basic('admin', ADMIN_PASSWORD) }));
    expect(await x.until(/\r\n\r\n/)).toMatch(/^HTTP\/1\.1 409 /);
    await x.closed;
    expect(x.text()).not.toMatch(/100 Continue/);
  });

  it('an accepted upload gets 100 Continue first, then 201 once the body is in', async () => {
    const x = exchange(headOf('PUT', '/dav/accepted.bin', { Authorization: basic('admin', ADMIN_PASSWORD) }));
    expect(await x.until(/\r\n\r\n/)).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\n$/);
    x.sendBody();
    expect(await x.until(/HTTP\/1\.1 201 /)).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /);
    expect((await readFile(join(s.dataDir, 'storage', 'accepted.bin'))).equals(BODY)).toBe(true);
  });
});

describe('REST /api/fs/put with Expect: 100-continue', () => {
  it('a bad token gets its answer without 100 Continue', async () => {
    const x = exchange(headOf('PUT', '/api/fs/put', { Authorization: 'not-a-token', 'File-Path': '/refused.bin' }));
    await x.until(/"code":401/);
    await x.closed;
    expect(x.text()).not.toMatch(/100 Continue/);
  });

  it('a good token gets 100 Continue, then the upload lands', async () => {
    const x = exchange(headOf('PUT', '/api/fs/put', { Authorization: token, 'File-Path': '/rest-accepted.bin' }));
    expect(await x.until(/\r\n\r\n/)).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\n$/);
    x.sendBody();
    expect(await x.until(/"code":200/)).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    expect((await readFile(join(s.dataDir, 'storage', 'rest-accepted.bin'))).equals(BODY)).toBe(true);
  });
});
