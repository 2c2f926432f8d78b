import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSpan } from './file-copy.js';
import { FILE_HIGH_WATER_MARK } from './link.js';
import { sendfileAvailable } from './socket-sendfile.js';

// Several buffers' worth plus an odd tail, so slots are reused and the last read is short.
const DATA = randomBytes(5 * FILE_HIGH_WATER_MARK + 12_345);
let dir: string;
let file: string;
/** What the server-side copy of the last request settled with. */
let settled: Promise<unknown>;

const settle = (p: Promise<void>) => (settled = p.then(() => 'ok', (e: NodeJS.ErrnoException) => e.code ?? e.message));

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tg-copy-'));
  file = join(dir, 'f.bin');
  await writeFile(file, DATA);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** `GET /start/end` over HTTP, or the same line over a bare socket; both send bytes [start, end]. */
function spanOf(line: string): [number, number] {
  return line.slice(1).split('/').map(Number) as [number, number];
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

/** Everything a connection receives after sending `request`, until the server closes it or `until` says so. */
function exchange(port: number, request: string, until?: (got: Buffer) => boolean): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = connect(port, '127.0.0.1', () => sock.write(request));
    sock.on('data', (c: Buffer) => {
      chunks.push(c);
      if (until?.(Buffer.concat(chunks))) (sock.destroy(), resolve(Buffer.concat(chunks)));
    });
    sock.on('end', () => resolve(Buffer.concat(chunks)));
    sock.on('error', reject);
  });
}

/** The bodies of the HTTP/1.1 responses in `raw`, each framed by its Content-Length. */
function httpBodies(raw: Buffer): Buffer[] {
  const bodies: Buffer[] = [];
  for (let at = 0; at < raw.length; ) {
    const headEnd = raw.indexOf('\r\n\r\n', at);
    const len = Number(/content-length: (\d+)/i.exec(raw.subarray(at, headEnd).toString())![1]);
    bodies.push(raw.subarray(headEnd + 4, headEnd + 4 + len));
    at = headEnd + 4 + len;
  }
  return bodies;
}

const transports = [
  {
    name: 'an HTTP response (sendfile when built)',
    serve: () =>
      createHttpServer((req, res) => {
        const [start, end] = spanOf(req.url ?? '');
        res.writeHead(200, { 'Content-Length': Math.max(0, end - start + 1) });
        settle(copyFileSpan(file, start, end, res));
      }),
    request: (start: number, end: number) => `GET /${start}/${end} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    body: (raw: Buffer) => httpBodies(raw)[0]!,
  },
  {
    name: 'a bare socket (reused buffers)',
    serve: () =>
      createNetServer((sock) =>
        sock.once('data', (line: Buffer) => {
          const [start, end] = spanOf(line.toString().trim());
          settle(copyFileSpan(file, start, end, sock as Writable));
        }),
      ),
    request: (start: number, end: number) => `/${start}/${end}\n`,
    body: (raw: Buffer) => raw,
  },
];

describe.each(transports)('copyFileSpan into $name', ({ serve, request, body }) => {
  let server: Server;
  let port: number;
  const fetch = async (port: number, start: number, end: number) => body(await exchange(port, request(start, end)));
  beforeAll(async () => {
    server = serve();
    port = await listen(server);
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('copies exactly the span asked for', async () => {
    expect((await fetch(port, 0, DATA.length - 1)).equals(DATA)).toBe(true);
    expect(await settled).toBe('ok');
    const mid = [FILE_HIGH_WATER_MARK - 7, 3 * FILE_HIGH_WATER_MARK + 99] as const;
    expect((await fetch(port, ...mid)).equals(DATA.subarray(mid[0], mid[1] + 1))).toBe(true);
    expect((await fetch(port, 10, 10)).equals(DATA.subarray(10, 11))).toBe(true);
    expect((await fetch(port, 0, -1)).length).toBe(0);
    expect(await settled).toBe('ok');
  });

  it('stops with an error, not a hang, when the client goes away', async () => {
    await exchange(port, request(0, DATA.length - 1), () => true); // hangs up at the first bytes
    // Which error depends on timing: the socket is seen closed (premature close), or a write meets
    // the peer's reset first (ECONNRESET, seen on a loaded machine). Either way the copy stops.
    expect(['ERR_STREAM_PREMATURE_CLOSE', 'ECONNRESET', 'EPIPE']).toContain(await settled);
  });

  it('fails rather than pads when the file is shorter than the span', async () => {
    await fetch(port, 0, DATA.length + 100).catch(() => undefined);
    expect(await settled).toMatch(/file shrank/);
  });
});

describe('copyFileSpan over HTTP', () => {
  it('uses the sendfile addon on Linux (npm run build compiles it)', () => {
    expect(sendfileAvailable).toBe(process.platform === 'linux');
  });

  it('waits for a slow reader: the body arrives whole after the client stalls', async () => {
    const server = transports[0]!.serve();
    const port = await listen(server);
    try {
      const raw = await new Promise<Buffer>((resolve, reject) => {
        const chunks: Buffer[] = [];
        const sock = connect(port, '127.0.0.1', () => sock.write(transports[0]!.request(0, DATA.length - 1)));
        sock.pause(); // the socket buffers fill, so the server must wait for room, then carry on
        setTimeout(() => sock.resume(), 300);
        sock.on('data', (c: Buffer) => chunks.push(c));
        sock.on('end', () => resolve(Buffer.concat(chunks)));
        sock.on('error', reject);
      });
      expect(httpBodies(raw)[0]!.equals(DATA)).toBe(true);
      expect(await settled).toBe('ok');
    } finally {
      server.close();
    }
  });

  it('stops when the server drops the connection mid-body (as a shutdown does), and the client sees it close', async () => {
    const big = join(dir, 'big.bin');
    await writeFile(big, '');
    await truncate(big, 64 << 20); // sparse; more than the socket buffers hold, so the send is still waiting
    let response: ServerResponse | undefined;
    const server = createHttpServer((req, res) => {
      response = res;
      res.writeHead(200, { 'Content-Length': 64 << 20 });
      settle(copyFileSpan(big, 0, (64 << 20) - 1, res));
    });
    const port = await listen(server);
    try {
      const closed = new Promise<number>((resolve) => {
        let got = 0;
        const sock = connect(port, '127.0.0.1', () => sock.write(`GET / HTTP/1.1\r\nHost: x\r\n\r\n`));
        sock.once('data', (c: Buffer) => {
          got += c.length;
          sock.pause(); // stop reading: the server's send now waits for room
          setTimeout(() => response!.socket!.destroy(), 100);
          setTimeout(() => sock.resume(), 200);
        });
        sock.on('data', (c: Buffer) => (got += c.length));
        sock.on('error', () => undefined);
        sock.on('close', () => resolve(got));
      });
      expect(await closed).toBeLessThan(64 << 20);
      expect(await settled).toBe('ERR_STREAM_PREMATURE_CLOSE');
    } finally {
      server.close();
    }
  });

  it('keeps pipelined responses framed: each body after its own head, in order', async () => {
    const server = transports[0]!.serve();
    const port = await listen(server);
    try {
      const spans = [[0, DATA.length - 1], [5, 99_999], [FILE_HIGH_WATER_MARK, 2 * FILE_HIGH_WATER_MARK + 3]] as const;
      const requests = spans.map(([s, e], i) => `GET /${s}/${e} HTTP/1.1\r\nHost: x\r\n${i === spans.length - 1 ? 'Connection: close\r\n' : ''}\r\n`);
      const bodies = httpBodies(await exchange(port, requests.join('')));
      expect(bodies.map((b) => b.length)).toEqual(spans.map(([s, e]) => e - s + 1));
      spans.forEach(([s, e], i) => expect(bodies[i]!.equals(DATA.subarray(s, e + 1))).toBe(true));
    } finally {
      server.close();
    }
  });
});
