/**
 * Slow clients on the HTTP port (protocols/http-idle.ts). Node's requestTimeout (5 min for the whole
 * request, body included) was the only limit on a request body: a client that stopped sending
 * mid-upload held its connection and a `.treegate-upload-*` temp file for 5 minutes, and a steady
 * upload longer than 5 minutes was cut off. Now a body from which nothing arrives for
 * `http.idle_timeout` seconds is cut off (the upload leaves nothing behind), the whole request has no
 * limit, and connections waiting on the server are kept.
 * Spoken over raw sockets; http.idle_timeout is 1 s here. No timing is asserted, only outcomes.
 */
import { mkdtemp, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { limitIdleClients } from '../protocols/http-idle.js';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';

let s: TestServer;
let token: string;
let data: string;
const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  data = await mkdtemp(join(tmpdir(), 'treegate-slow-'));
  await writeFile(join(data, 'config.json'), JSON.stringify({ http: { idle_timeout: 1 } }));
  s = await startTestServer({ dataDir: data });
  token = await s.login();
});
afterAll(async () => {
  await s?.close();
  await rm(data, { recursive: true, force: true });
});

/** A raw connection: everything the server says, and whether (and when) it closed. */
function open(head: string) {
  const sock: Socket = connect(Number(new URL(s.url).port), '127.0.0.1');
  let got = '';
  let isClosed = false;
  sock.on('data', (b: Buffer) => (got += b.toString('latin1')));
  sock.on('error', () => undefined);
  const closed = new Promise<void>((r) => sock.once('close', () => ((isClosed = true), r())));
  sock.write(head);
  return { sock, closed, isClosed: () => isClosed, text: () => got };
}

/** The connection closed within `ms` (a bound far above the 1 s limit: liveness, not timing). */
async function closesWithin(c: ReturnType<typeof open>, ms: number): Promise<boolean> {
  await Promise.race([c.closed, sleep(ms)]);
  return c.isClosed();
}

const storage = () => join(data, 'storage');
async function leftovers(name: string): Promise<string[]> {
  // The aborted upload removes its temp file asynchronously: give it a moment.
  for (let i = 0; i < 50; i++) {
    const names = (await readdir(storage())).filter((n) => n === name || n.startsWith('.treegate-upload-'));
    if (names.length === 0) return names;
    await sleep(100);
  }
  return (await readdir(storage())).filter((n) => n === name || n.startsWith('.treegate-upload-'));
}

const head = (lines: string[]) => lines.join('\r\n') + '\r\n\r\n';

describe('a request body that stops mid-way is cut off after http.idle_timeout', () => {
  it('WebDAV PUT: the connection closes, nothing is left under the name or as a temp file', async () => {
    const c = open(head(['PUT /dav/stalled-dav.bin HTTP/1.1', 'Host: x', `Authorization: ${basic}`, 'Content-Length: 1000000']));
    c.sock.write(Buffer.alloc(64 * 1024, 'a'));
    expect(await closesWithin(c, 20_000)).toBe(true);
    expect(await leftovers('stalled-dav.bin')).toEqual([]);
  });

  it('REST /api/fs/put: the same', async () => {
    const c = open(head(['PUT /api/fs/put HTTP/1.1', 'Host: x', `Authorization: ${token}`, 'File-Path: /stalled-put.bin', 'Content-Length: 1000000']));
    c.sock.write(Buffer.alloc(64 * 1024, 'b'));
    expect(await closesWithin(c, 20_000)).toBe(true);
    expect(await leftovers('stalled-put.bin')).toEqual([]);
  });

  it('REST /api/fs/form (multipart): the same', async () => {
    const part = '--XyZ\r\nContent-Disposition: form-data; name="file"; filename="f.bin"\r\nContent-Type: application/octet-stream\r\n\r\n';
    const c = open(head(['PUT /api/fs/form HTTP/1.1', 'Host: x', `Authorization: ${token}`, 'File-Path: /stalled-form.bin', 'Content-Type: multipart/form-data; boundary=XyZ', 'Content-Length: 1000000']));
    c.sock.write(part + 'c'.repeat(64 * 1024));
    expect(await closesWithin(c, 20_000)).toBe(true);
    expect(await leftovers('stalled-form.bin')).toEqual([]);
  });

  it('a PROPFIND whose XML body stops (read by async iteration, not piped) is cut off too', async () => {
    const c = open(head(['PROPFIND /dav/ HTTP/1.1', 'Host: x', `Authorization: ${basic}`, 'Depth: 0', 'Content-Length: 500']));
    c.sock.write('<?xml version="1.0"?><D:propfind xmlns:D="DAV:">');
    expect(await closesWithin(c, 20_000)).toBe(true);
  });

  it('a JSON body that stops is cut off too', async () => {
    const c = open(head(['POST /api/fs/list HTTP/1.1', 'Host: x', `Authorization: ${token}`, 'Content-Type: application/json', 'Content-Length: 500']));
    c.sock.write('{"path": "/"');
    expect(await closesWithin(c, 20_000)).toBe(true);
  });
});

describe('connections that are not stalled are kept', () => {
  it('an upload that keeps sending, for several times http.idle_timeout, completes', async () => {
    const chunks = 12;
    const c = open(head(['PUT /dav/steady.bin HTTP/1.1', 'Host: x', `Authorization: ${basic}`, `Content-Length: ${chunks * 1024}`]));
    for (let i = 0; i < chunks; i++) {
      c.sock.write(Buffer.alloc(1024, 'd'));
      await sleep(300);
    }
    for (let i = 0; i < 100 && !/\r\n\r\n/.test(c.text()); i++) await sleep(100);
    expect(c.text()).toMatch(/^HTTP\/1\.1 201 /);
    expect(c.isClosed()).toBe(false);
    c.sock.destroy();
  });

  it('a download the client stops reading for longer than http.idle_timeout is not cut off', async () => {
    await mkdir(join(storage(), 'dl'), { recursive: true });
    const size = 32 * 1024 * 1024; // far more than the socket buffers hold
    await writeFile(join(storage(), 'dl', 'big.bin'), Buffer.alloc(size, 'e'));
    const c = open(head(['GET /dav/dl/big.bin HTTP/1.1', 'Host: x', `Authorization: ${basic}`, 'Connection: close']));
    c.sock.pause(); // a paused player: the server is held up by backpressure
    await sleep(3000);
    let bytes = 0;
    c.sock.removeAllListeners('data');
    c.sock.on('data', (b: Buffer) => (bytes += b.length));
    c.sock.resume();
    await c.closed;
    expect(bytes).toBeGreaterThan(size);
  });

  it('a keep-alive connection still serves a second request after the first', async () => {
    const c = open(head(['GET /ping HTTP/1.1', 'Host: x']));
    for (let i = 0; i < 50 && !c.text().includes('pong'); i++) await sleep(50);
    c.sock.write(head(['GET /ping HTTP/1.1', 'Host: x', 'Connection: close']));
    await c.closed;
    expect(c.text().match(/pong/g)?.length).toBe(2);
  });
});

describe('limitIdleClients', () => {
  it('turns off Node\'s cap on a whole request (5 min, which cut off long uploads)', () => {
    const server: Server = createServer();
    expect(server.requestTimeout).toBe(300_000); // Node's default, for the record
    limitIdleClients(server, 120_000);
    expect(server.requestTimeout).toBe(0);
    expect(server.timeout).toBe(120_000);
    expect(server.headersTimeout).toBe(60_000); // kept: header slowloris
  });
});
