import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collect } from '../../drivers/conformance/helpers.js';
import { clampRange, LINK_TIMEOUTS, openLink } from './link.js';

const DATA = Buffer.from('0123456789abcdefghij');

describe('openLink', () => {
  let a: Server;
  let b: Server;
  let portA = 0;
  let portB = 0;
  const seen: Array<{ server: string; url: string; auth?: string; range?: string }> = [];
  const handler = (name: string, honourRange: boolean) => (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    seen.push({ server: name, url: req.url!, auth: req.headers.authorization, range: req.headers.range });
    if (req.url === '/redirect-away') return res.writeHead(302, { location: `http://localhost:${portB}/file` }).end();
    if (req.url === '/redirect-home') return res.writeHead(302, { location: '/file' }).end();
    if (req.url === '/missing') return res.writeHead(404).end();
    if (req.url === '/silent') return; // never answers
    if (req.url === '/stalls') return void res.writeHead(200, { 'content-length': 1000 }).write(DATA); // then nothing
    const m = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? '');
    if (m && honourRange) {
      const end = m[2] ? Number(m[2]) : DATA.length - 1;
      return res.writeHead(206).end(DATA.subarray(Number(m[1]), end + 1));
    }
    res.writeHead(200).end(DATA);
  };
  let dir: string;

  beforeAll(async () => {
    a = createServer(handler('a', true)).listen(0, '127.0.0.1');
    b = createServer(handler('b', false)).listen(0, '127.0.0.1');
    await Promise.all([a, b].map((s) => new Promise((r) => s.once('listening', r))));
    portA = (a.address() as AddressInfo).port;
    portB = (b.address() as AddressInfo).port;
    dir = await mkdtemp(join(tmpdir(), 'tg-link-'));
  });
  afterAll(async () => {
    a.close();
    b.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('reads file links whole and by range', async () => {
    const f = join(dir, 'f');
    await writeFile(f, DATA);
    const link = { kind: 'file' as const, path: f, size: DATA.length };
    expect((await collect(await openLink(link))).equals(DATA)).toBe(true);
    expect((await collect(await openLink(link, { start: 3, end: 5 }))).toString()).toBe('345');
    expect((await collect(await openLink(link, { start: 18 }))).toString()).toBe('ij');
  });

  it('fetches url links with a Range header, slicing when the server ignores it', async () => {
    const headers = { Authorization: 'Bearer t' };
    expect((await collect(await openLink({ kind: 'url', url: `http://127.0.0.1:${portA}/file`, headers }, { start: 2, end: 4 }))).toString()).toBe('234');
    expect((await collect(await openLink({ kind: 'url', url: `http://127.0.0.1:${portB}/file` }, { start: 15 }))).toString()).toBe('fghij');
    await expect(openLink({ kind: 'url', url: `http://127.0.0.1:${portA}/missing` })).rejects.toMatchObject({ code: 'UPSTREAM' });
  });

  it('keeps credentials on same-origin redirects and drops them across hosts', async () => {
    seen.length = 0;
    const headers = { Authorization: 'Bearer secret' };
    await collect(await openLink({ kind: 'url', url: `http://127.0.0.1:${portA}/redirect-home`, headers }));
    await collect(await openLink({ kind: 'url', url: `http://127.0.0.1:${portA}/redirect-away`, headers }, { start: 1, end: 2 }));
    expect(seen.map((s) => [s.server, s.url, s.auth ?? null])).toEqual([
      ['a', '/redirect-home', 'Bearer secret'], ['a', '/file', 'Bearer secret'],
      ['a', '/redirect-away', 'Bearer secret'], ['b', '/file', null],
    ]);
    expect(seen[3]!.range).toBe('bytes=1-2');
  });

  it('a url link whose server goes silent fails after LINK_TIMEOUTS.idleMs, before its answer or mid-body', async () => {
    const saved = LINK_TIMEOUTS.idleMs;
    LINK_TIMEOUTS.idleMs = 300;
    try {
      await expect(openLink({ kind: 'url', url: `http://127.0.0.1:${portA}/silent` })).rejects.toMatchObject({ code: 'UPSTREAM', message: 'link download went silent' });
      const body = await openLink({ kind: 'url', url: `http://127.0.0.1:${portA}/stalls` });
      await expect(collect(body)).rejects.toThrow();
      // The timer only counts silence: a body that comes is read whole.
      const whole = await openLink({ kind: 'url', url: `http://127.0.0.1:${portA}/file` });
      expect((await collect(whole)).equals(DATA)).toBe(true);
    } finally {
      LINK_TIMEOUTS.idleMs = saved;
    }
  });

  it('clampRange', () => {
    expect(clampRange(undefined, 10)).toEqual({ start: 0, end: 9 });
    expect(clampRange({ start: 5, end: 100 }, 10)).toEqual({ start: 5, end: 9 });
    expect(clampRange(undefined, 0)).toEqual({ start: 0, end: -1 });
    expect(() => clampRange({ start: 10 }, 10)).toThrow('range not satisfiable');
    expect(() => clampRange({ start: 4, end: 2 }, 10)).toThrow('range not satisfiable');
  });
});
