import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, get, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSpan } from './file-copy.js';
import { FILE_HIGH_WATER_MARK } from './link.js';

// Several buffers' worth plus an odd tail, so slots are reused and the last read is short.
const DATA = randomBytes(5 * FILE_HIGH_WATER_MARK + 12_345);
let dir: string;
let file: string;
let server: Server;
let port: number;
/** What the server-side copy of the last request settled with. */
let settled: Promise<unknown>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tg-copy-'));
  file = join(dir, 'f.bin');
  await writeFile(file, DATA);
  server = createServer((req, res) => {
    const [start, end] = (req.url ?? '').slice(1).split('/').map(Number) as [number, number];
    res.writeHead(200, { 'Content-Length': Math.max(0, end - start + 1) });
    settled = copyFileSpan(file, start, end, res).then(() => 'ok', (e: NodeJS.ErrnoException) => e.code ?? e.message);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.close();
  await rm(dir, { recursive: true, force: true });
});

function fetchSpan(start: number, end: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path: `/${start}/${end}` }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks)));
      res.on('error', reject);
    }).on('error', reject);
  });
}

describe('copyFileSpan', () => {
  it('copies exactly the span asked for, reusing its buffers', async () => {
    expect((await fetchSpan(0, DATA.length - 1)).equals(DATA)).toBe(true);
    expect(await settled).toBe('ok');
    const mid = [FILE_HIGH_WATER_MARK - 7, 3 * FILE_HIGH_WATER_MARK + 99] as const;
    expect((await fetchSpan(...mid)).equals(DATA.subarray(mid[0], mid[1] + 1))).toBe(true);
    expect((await fetchSpan(10, 10)).equals(DATA.subarray(10, 11))).toBe(true);
    expect((await fetchSpan(0, -1)).length).toBe(0);
    expect(await settled).toBe('ok');
  });

  it('stops with a premature close, not a hang, when the client goes away', async () => {
    await new Promise<void>((resolve, reject) => {
      const req = get({ host: '127.0.0.1', port, path: `/0/${DATA.length - 1}` }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (e) => (e.message === 'socket hang up' ? undefined : reject(e)));
    });
    expect(await settled).toBe('ERR_STREAM_PREMATURE_CLOSE');
  });
});
