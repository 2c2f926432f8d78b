import { Readable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOptions } from '../options.js';
import { runConformance } from '../conformance/suite.js';
import { codeOf, collect, names, NO_ARGS, rootObj } from '../conformance/helpers.js';
import { openLink } from '../../src/vfs/link.js';
import type { Driver, DriverDefinition } from '../types.js';
import { cutProxy, freePort, initAgainstMuteServer } from '../testing/process.js';
import { startVsftpd, type Vsftpd } from '../testing/vsftpd.js';
import { ftpDefinition } from './index.js';
import { parseListDate } from './list-date.js';

const def = ftpDefinition as unknown as DriverDefinition;
const log = pino({ level: 'silent' });

describe('FTP driver against vsftpd', () => {
  let ftpd: Vsftpd;
  beforeAll(async () => { ftpd = await startVsftpd(); });
  afterAll(async () => { await ftpd?.stop(); });

  const optionsFor = (extra: Record<string, unknown> = {}) => parseOptions(def, {
    address: `127.0.0.1:${ftpd.port}`, encoding: 'UTF-8', username: ftpd.user, password: ftpd.password, root_folder_path: '/', ...extra,
  });

  runConformance(def, async () => ({ options: optionsFor(), cleanup: async () => undefined }));

  it('fails init quickly and clearly: wrong password, dead port, missing root, abort, bad encoding', async () => {
    const bad = await def.create(optionsFor({ password: 'wrong' }), { log, dataDir: '/x' });
    await expect(bad.init(AbortSignal.timeout(10_000))).rejects.toThrow(/login failed for user/);
    const dead = await def.create(optionsFor({ address: `127.0.0.1:${await freePort()}` }), { log, dataDir: '/x' });
    await expect(dead.init(AbortSignal.timeout(10_000))).rejects.toThrow(/ECONNREFUSED/);
    const missing = await def.create(optionsFor({ root_folder_path: '/nope' }), { log, dataDir: '/x' });
    await expect(missing.init(AbortSignal.timeout(10_000))).rejects.toThrow(/root folder \/nope not exists/);
    await missing.drop();
    const mute = await initAgainstMuteServer((port) => def.create(optionsFor({ address: `127.0.0.1:${port}` }), { log, dataDir: '/x' }), codeOf);
    expect(mute.code).toBe('UPSTREAM');
    expect(mute.ms).toBeLessThan(3000);
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
