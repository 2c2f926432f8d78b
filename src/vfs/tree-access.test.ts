import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { collect } from '../../drivers/conformance/helpers.js';
import { memoryDefinition } from '../../drivers/memory/index.js';
import { MemoryDriver } from '../../drivers/memory/memory.js';
import type { DriverDefinition, Link, Obj } from '../../drivers/types.js';
import { PERM } from '../auth/principal.js';
import { isVfsError } from '../errors.js';
import { body, ctx, makeCore, principal, storage, type TestCore } from './testing.js';
import { MAX_URL_THUMB_BYTES, treeAccessOf } from './tree-access.js';

describe('tree access for drivers (Alias)', () => {
  let core: TestCore;
  beforeEach(async () => {
    core = await makeCore();
    await core.storages.create(storage('/m'));
  });
  afterEach(async () => core.cleanup());

  const codeOf = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (isVfsError(e) ? e.code : String(e)));

  it('reads and writes through the VFS, with vpaths in Obj.path', async () => {
    const tree = treeAccessOf(core.vfs);
    const made = await tree.put('/m/a/b.txt', Readable.from([Buffer.from('hello')]), { size: 5 });
    expect(made).toMatchObject({ name: 'b.txt', path: '/m/a/b.txt', size: 5, isDir: false });
    expect((await tree.list('/m/a', {})).map((o) => o.path)).toEqual(['/m/a/b.txt']);
    await tree.moveTo('/m/a/b.txt', '/m/a/c.txt', {});
    expect((await tree.stat('/m/a/c.txt', {})).size).toBe(5);
  });

  it('keeps meta rules: hidden is NOT_FOUND, a path password is required', async () => {
    const tree = treeAccessOf(core.vfs);
    await tree.mkdir('/m/secret', {});
    await tree.mkdir('/m/locked', {});
    await core.metas.create({ path: '/m', hide: '^secret$' });
    await core.metas.create({ path: '/m/locked', password: 'pw' });
    expect((await tree.list('/m', {})).map((o) => o.name)).toEqual(['locked']);
    expect(await codeOf(tree.stat('/m/secret', {}))).toBe('NOT_FOUND');
    expect(await codeOf(tree.list('/m/locked', {}))).toBe('PASSWORD_REQUIRED');
  });
});

describe('tree access: a thumbnail a backend gives at an address', () => {
  let core: TestCore;
  let server: Server;
  let sent = 0;
  const THUMB = Buffer.from('\x89PNG a small picture');

  beforeEach(async () => {
    // The backend: /small answers a thumbnail; /endless streams without end (a broken or hostile one).
    server = createServer((req, res) => {
      if (req.url === '/small') return void res.end(THUMB);
      const chunk = Buffer.alloc(64 * 1024);
      const more = () => {
        while (!res.destroyed && (sent += chunk.length) && res.write(chunk));
        if (!res.destroyed) res.once('drain', more);
      };
      more();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const urlThumbs: DriverDefinition = {
      ...(memoryDefinition as unknown as DriverDefinition),
      config: { ...memoryDefinition.config, name: 'UrlThumbs' },
      create: () => {
        const d = new MemoryDriver() as MemoryDriver & { thumbnail(file: Obj): Promise<Link> };
        d.thumbnail = async (file: Obj) => ({ kind: 'url', url: `${base}/${file.name}` });
        return d;
      },
    };
    core = await makeCore([urlThumbs]);
    await core.storages.create(storage('/u', 'UrlThumbs'));
    for (const name of ['small', 'endless']) await core.vfs.put(ctx(principal(PERM.WRITE)), `/u/${name}`, body('picture'));
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await core.cleanup();
  });

  it('is read whole when small, and refused past MAX_URL_THUMB_BYTES rather than held in memory', async () => {
    const tree = treeAccessOf(core.vfs);
    const small = await tree.thumbnail('/u/small', { source: 'image' });
    expect(small).toMatchObject({ kind: 'range', size: THUMB.length });
    const got = await collect(await (small as Extract<Link, { kind: 'range' }>).open(undefined, new AbortController().signal));
    expect(got.equals(THUMB)).toBe(true);
    await expect(tree.thumbnail('/u/endless', { source: 'image' })).rejects.toMatchObject({ code: 'UPSTREAM', message: 'thumbnail too large' });
    // The backend was let go just past the limit, not read to the end (there is none).
    await new Promise((r) => setTimeout(r, 200));
    const after = sent;
    await new Promise((r) => setTimeout(r, 200));
    expect(sent).toBe(after);
    expect(sent).toBeLessThan(MAX_URL_THUMB_BYTES * 4);
  });
});
