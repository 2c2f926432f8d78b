import { Readable } from 'node:stream';
import pino from 'pino';
import type { Client } from 'basic-ftp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseOptions } from '../options.js';
import { runConformance } from '../conformance/suite.js';
import { codeOf, collect, names, NO_ARGS, rootObj } from '../conformance/helpers.js';
import { openLink } from '../../src/vfs/link.js';
import type { Driver, DriverDefinition } from '../types.js';
import { cutProxy, freePort, initAgainstMuteServer } from '../testing/process.js';
import { startVsftpd, type Vsftpd } from '../testing/vsftpd.js';
import { ftpDefinition } from './index.js';
import { parseListDate } from './list-date.js';
import { FtpSession, POOL_SIZE } from './session.js';

const def = ftpDefinition as unknown as DriverDefinition;
const log = pino({ level: 'silent' });

function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
}

/** An upload body that sends `half`, waits for `go`, then sends it again (a slow client mid-upload). */
function stalled(half: Buffer, go: Promise<void>): Readable {
  return Readable.from((async function* () {
    yield half;
    await go;
    yield half;
  })(), { objectMode: false });
}

/** A pooled job that takes its connection, says so, and keeps it until released. */
function holder() {
  const entered = deferred();
  const done = deferred();
  return {
    entered: entered.promise,
    release: () => done.resolve(),
    job: async (c: Client) => { entered.resolve(); await done.promise; return c; },
  };
}

describe('FTP driver against vsftpd', () => {
  let ftpd: Vsftpd;
  beforeAll(async () => { ftpd = await startVsftpd(); });
  afterAll(async () => { await ftpd?.stop(); });

  const optionsFor = (extra: Record<string, unknown> = {}) => parseOptions(def, {
    address: `127.0.0.1:${ftpd.port}`, encoding: 'UTF-8', username: ftpd.user, password: ftpd.password, root_folder_path: '/', ...extra,
  });

  runConformance(def, async () => ({ options: optionsFor(), cleanup: async () => undefined }));

  it('fails init clearly: wrong password, dead port, missing root, an abort while the server says nothing, bad encoding', async () => {
    const bad = await def.create(optionsFor({ password: 'wrong' }), { log, dataDir: '/x' });
    await expect(bad.init(AbortSignal.timeout(10_000))).rejects.toThrow(/login failed for user/);
    const dead = await def.create(optionsFor({ address: `127.0.0.1:${await freePort()}` }), { log, dataDir: '/x' });
    await expect(dead.init(AbortSignal.timeout(10_000))).rejects.toThrow(/ECONNREFUSED/);
    const missing = await def.create(optionsFor({ root_folder_path: '/nope' }), { log, dataDir: '/x' });
    await expect(missing.init(AbortSignal.timeout(10_000))).rejects.toThrow(/root folder \/nope not exists/);
    await missing.drop();
    expect(await initAgainstMuteServer((port) => def.create(optionsFor({ address: `127.0.0.1:${port}` }), { log, dataDir: '/x' }), codeOf)).toBe('UPSTREAM');
    expect(() => def.create(optionsFor({ encoding: 'EBCDIC-XX' }), { log, dataDir: '/x' })).toThrow(/unsupported encoding/);
  });

  it('reconnects after the control connection drops; downloads use their own connection', async () => {
    const proxy = await cutProxy(ftpd.port);
    const d = await def.create(optionsFor({ address: `127.0.0.1:${proxy.port}` }), { log, dataDir: '/x' }) as Required<Driver>;
    try {
      await d.init(AbortSignal.timeout(10_000));
      await d.put(rootObj, Readable.from([Buffer.from('0123456789')]), { name: 'again.txt', size: 10 });
      const link = await d.link(await d.get('/again.txt', NO_ARGS), NO_ARGS);
      const partial = await openLink(link, { start: 2, end: 4 });
      // The unread download holds its own connection, so the queue is free for other commands.
      expect(await names(d, '/')).toContain('again.txt');
      expect((await collect(partial)).toString()).toBe('234');
      proxy.cut();
      expect(await names(d, '/')).toContain('again.txt');
      await d.remove(await d.get('/again.txt', NO_ARGS), NO_ARGS);
    } finally {
      await d.drop();
      await proxy.close();
    }
  });

  it('a stalled upload holds one connection: listing, stat and another upload still answer meanwhile', async () => {
    const d = await def.create(optionsFor(), { log, dataDir: '/x' }) as Required<Driver>;
    const go = deferred();
    try {
      await d.init(AbortSignal.timeout(10_000));
      const dir = (await d.mkdir(rootObj, 'stalled-upload', NO_ARGS))!;
      await d.put(dir, Readable.from([Buffer.from('known')]), { name: 'known.txt', size: 5 });
      const started = deferred();
      const slow = d.put(dir, stalled(Buffer.from('0123'), go.promise), { name: 'slow.bin', size: 8, onProgress: () => started.resolve() });
      slow.catch(() => undefined); // awaited below; if the test fails first, it must not go unhandled
      await started.promise;
      expect(await names(d, '/stalled-upload')).toContain('known.txt'); // next to the upload's temp file
      expect((await d.get('/stalled-upload/known.txt', NO_ARGS)).size).toBe(5);
      await d.put(dir, Readable.from([Buffer.from('other')]), { name: 'other.txt', size: 5 });
      go.resolve(); // the slow client sends the rest
      await slow;
      expect(await names(d, '/stalled-upload')).toEqual(['known.txt', 'other.txt', 'slow.bin']);
      await d.remove(dir, NO_ARGS);
    } finally {
      go.resolve();
      await d.drop();
    }
  });

  it('drop() fails the jobs waiting for a connection at once, and the running ones', async () => {
    const d = await def.create(optionsFor(), { log, dataDir: '/x' }) as Required<Driver>;
    const go = deferred();
    try {
      await d.init(AbortSignal.timeout(10_000));
      const dir = (await d.mkdir(rootObj, 'drop-while-busy', NO_ARGS))!;
      const started = Array.from({ length: POOL_SIZE }, () => deferred());
      const uploads = started.map((s, i) => codeOf(d.put(dir, stalled(Buffer.from('0123'), go.promise), { name: `held-${i}.bin`, size: 8, onProgress: () => s.resolve() })));
      await Promise.all(started.map((s) => s.promise)); // every pooled connection is now busy
      const waiting = d.list(dir, NO_ARGS).catch((e: Error) => e.message);
      await d.drop();
      expect(await waiting).toMatch(/storage was closed/);
      expect(await Promise.all(uploads)).toEqual(Array(POOL_SIZE).fill('UPSTREAM'));
      await expect(d.list(dir, NO_ARGS)).rejects.toThrow(/storage was closed/);
    } finally {
      go.resolve();
      await d.drop();
    }
  });

  it('pools connections: no more than the pool size, idle ones reused (most recent first), dropped when aborted, broken or idle too long', async () => {
    const params = { host: '127.0.0.1', port: ftpd.port, user: ftpd.user, password: ftpd.password, encoding: 'utf8' as const };
    const s = new FtpSession(params, log, { size: 2 });
    const dial = vi.spyOn(s, 'dial');
    try {
      const a = holder();
      const b = holder();
      const ja = s.run(a.job);
      const jb = s.run(b.job);
      await Promise.all([a.entered, b.entered]);
      const jc = s.run(async (c) => c); // the pool is full: this waits for a connection
      b.release();
      const cb = await jb;
      expect(await jc).toBe(cb);
      a.release();
      const ca = await ja;
      expect(ca).not.toBe(cb);
      expect(await s.run(async (c) => c)).toBe(ca); // the last one back is the first one out
      expect(dial).toHaveBeenCalledTimes(2);

      const ac = new AbortController();
      await expect(s.run(async (c) => { ac.abort(); return c.pwd(); }, { signal: ac.signal })).rejects.toThrow(/aborted/);
      expect(ca.closed).toBe(true); // an aborted job's connection is closed, not pooled
      await expect(s.run(async (c) => { c.close(); return c.pwd(); })).rejects.toThrow(/closed/); // a broken one
      const fresh = await s.run(async (c) => c);
      expect([ca, cb]).not.toContain(fresh);
      expect(dial).toHaveBeenCalledTimes(3);
    } finally {
      s.close();
    }

    const brief = new FtpSession(params, log, { idleMs: 1 });
    try {
      const closed = deferred();
      const first = await brief.run(async (c) => {
        const close = c.close.bind(c);
        c.close = () => { close(); closed.resolve(); };
        return c;
      });
      await closed.promise; // the idle timer closed it
      const second = await brief.run(async (c) => c);
      expect(second).not.toBe(first);
      expect(second.closed).toBe(false);
    } finally {
      brief.close();
    }
  });

  it('ISO-8859-1: names the encoding cannot carry are INVALID (put, mkdir, rename, move), never mangled', async () => {
    const d = await def.create(optionsFor({ encoding: 'ISO-8859-1' }), { log, dataDir: '/x' }) as Required<Driver>;
    try {
      await d.init(AbortSignal.timeout(10_000));
      const dir = (await d.mkdir(rootObj, 'latin1-case', NO_ARGS))!;
      const body = () => Readable.from([Buffer.from('x')]);
      expect(await codeOf(d.put(dir, body(), { name: '漢.txt', size: 1 }))).toBe('INVALID');
      expect(await codeOf(d.put(dir, body(), { name: '氢.txt', size: 1 }))).toBe('INVALID');
      expect(await codeOf(d.mkdir(dir, '漢', NO_ARGS))).toBe('INVALID');
      await d.put(dir, body(), { name: 'café.txt', size: 1 }); // Latin-1 itself round-trips
      const file = await d.get('/latin1-case/café.txt', NO_ARGS);
      expect(await codeOf(d.rename(file, '氢.txt', NO_ARGS))).toBe('INVALID');
      const sub = (await d.mkdir(dir, 'sub', NO_ARGS))!;
      expect(await codeOf(d.move({ ...file, name: '漢.txt', path: '/latin1-case/漢.txt' }, sub, NO_ARGS))).toBe('INVALID');
      expect(await names(d, '/latin1-case')).toEqual(['café.txt', 'sub']);
      await d.remove(dir, NO_ARGS);
    } finally {
      await d.drop();
    }
  });
});

it('parses LIST dates', () => {
  const now = new Date('2024-02-10T00:00:00Z');
  expect(parseListDate('Mar 04  2021', now)?.toISOString()).toBe('2021-03-04T00:00:00.000Z');
  expect(parseListDate('Jan 30 11:33', now)?.toISOString()).toBe('2024-01-30T11:33:00.000Z');
  expect(parseListDate('Dec 30 11:33', now)?.toISOString()).toBe('2023-12-30T11:33:00.000Z');
  expect(parseListDate('garbage', now)).toBeUndefined();
});
