import { Readable } from 'node:stream';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOptions } from '../options.js';
import { runConformance } from '../conformance/suite.js';
import { collect, names, NO_ARGS, rootObj } from '../conformance/helpers.js';
import { openLink } from '../../src/vfs/link.js';
import type { Driver, DriverDefinition } from '../types.js';
import { cutProxy, freePort } from '../testing/process.js';
import { startNginxDav, type NginxDav } from '../testing/nginx-dav.js';
import { startRcloneDav, type RcloneDav } from '../testing/rclone-dav.js';
import { webdavDefinition } from './index.js';

const def = webdavDefinition as unknown as DriverDefinition;
const log = pino({ level: 'silent' });

describe('WebDav driver against rclone serve webdav', () => {
  let dav: RcloneDav;
  beforeAll(async () => { dav = await startRcloneDav(); });
  afterAll(async () => { await dav?.stop(); });
  runConformance(def, async () => ({
    options: parseOptions(def, { address: dav.url, username: dav.user, password: dav.password }), cleanup: async () => undefined,
  }));
});

/**
 * nginx's dav_ext module leaves dot files out of PROPFIND answers: a property of that server, not of
 * the driver, so it is declared here as data for this run only.
 */
const nginxDef: DriverDefinition = {
  ...def,
  conformance: { ...def.conformance, unsupportedNames: { 'leading-dot': 'nginx dav_ext hides dot files from PROPFIND' } },
};

describe('WebDav driver against nginx dav', () => {
  let dav: NginxDav;
  beforeAll(async () => { dav = await startNginxDav(); });
  afterAll(async () => { await dav?.stop(); });

  const optionsFor = (extra: Record<string, unknown> = {}) => parseOptions(def, {
    address: dav.url, username: dav.user, password: dav.password, root_folder_path: '/', ...extra,
  });
  const make = async (extra: Record<string, unknown> = {}) => {
    const d = await def.create(optionsFor(extra), { log, dataDir: '/x' }) as Required<Driver>;
    await d.init(AbortSignal.timeout(10_000));
    return d;
  };

  runConformance(nginxDef, async () => ({ options: optionsFor(), cleanup: async () => undefined }));

  it('fails init quickly and clearly: wrong password, dead port, missing root', async () => {
    const bad = await def.create(optionsFor({ password: 'wrong' }), { log, dataDir: '/x' });
    await expect(bad.init(AbortSignal.timeout(10_000))).rejects.toThrow(/authentication failed \(401\)/);
    const dead = await def.create(optionsFor({ address: `http://127.0.0.1:${await freePort()}` }), { log, dataDir: '/x' });
    await expect(dead.init(AbortSignal.timeout(10_000))).rejects.toThrow(/ECONNREFUSED/);
    const missing = await def.create(optionsFor({ root_folder_path: '/nope' }), { log, dataDir: '/x' });
    await expect(missing.init(AbortSignal.timeout(10_000))).rejects.toThrow();
  });

  it('works under a root folder and keeps going after the server drops connections', async () => {
    const boot = await make();
    await boot.mkdir(rootObj, 'sub root', NO_ARGS);
    const proxy = await cutProxy(dav.port);
    const d = await make({ address: `http://127.0.0.1:${proxy.port}`, root_folder_path: '/sub root' });
    try {
      await d.put(rootObj, Readable.from([Buffer.from('abc')]), { name: 'f.txt', size: 3 });
      proxy.cut();
      expect(await names(d, '/')).toEqual(['f.txt']);
      const link = await d.link(await d.get('/f.txt', NO_ARGS), NO_ARGS);
      expect((await collect(await openLink(link, { start: 1 }))).toString()).toBe('bc');
    } finally {
      await d.drop();
      await boot.drop();
      await proxy.close();
    }
  });

  it('never sends credentials across a redirect to another origin', async () => {
    const seen: Array<string | undefined> = [];
    const other = createServer((req, res) => { seen.push(req.headers.authorization); res.end('elsewhere'); });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
    const otherPort = (other.address() as AddressInfo).port;
    const redirector = createServer((req, res) => {
      if (req.method === 'PROPFIND') {
        res.writeHead(207, { 'content-type': 'application/xml' });
        res.end('<?xml version="1.0"?><D:multistatus xmlns:D="DAV:"><D:response><D:href>/f</D:href><D:propstat><D:prop><D:resourcetype/><D:getcontentlength>9</D:getcontentlength></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>');
        return;
      }
      res.writeHead(302, { location: `http://localhost:${otherPort}/f` }).end();
    });
    await new Promise<void>((r) => redirector.listen(0, '127.0.0.1', () => r()));
    const d = await def.create(optionsFor({ address: `http://127.0.0.1:${(redirector.address() as AddressInfo).port}` }), { log, dataDir: '/x' }) as Required<Driver>;
    const link = await d.link({ name: 'f', path: '/f', size: 9, isDir: false, modified: new Date() }, NO_ARGS);
    expect((await collect(await openLink(link))).toString()).toBe('elsewhere');
    expect(seen).toEqual([undefined]);
    await d.drop();
    redirector.close();
    other.close();
  });
});
