import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseOptions } from '../options.js';
import { runConformance } from '../conformance/suite.js';
import { codeOf, collect, failing, NO_ARGS, rootObj } from '../conformance/helpers.js';
import { openLink } from '../../src/vfs/link.js';
import { body, ctx, makeCore, principal, storage } from '../../src/vfs/testing.js';
import type { Driver, DriverDefinition, Obj } from '../types.js';
import { localDefinition } from './index.js';
import { TEMP_PREFIX } from './listing.js';


const def = localDefinition as unknown as DriverDefinition;

runConformance(def, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'tg-local-conf-'));
  return { options: parseOptions(def, { root_folder_path: dir }), cleanup: () => rm(dir, { recursive: true, force: true }) };
});

describe('Local driver specifics', () => {
  let base: string;
  let root: string;
  let outside: string;
  const make = async (extra: Record<string, unknown> = {}) => {
    const d = await def.create(parseOptions(def, { root_folder_path: root, ...extra }), { log: pino({ level: 'silent' }), dataDir: base }) as Required<Driver>;
    await d.init(AbortSignal.timeout(5000));
    return d;
  };

  beforeEach(async () => {
    base = await mkdtemp(join(tmpdir(), 'tg-local-'));
    root = join(base, 'root');
    outside = join(base, 'outside');
    await mkdir(root);
    await mkdir(outside);
    await writeFile(join(outside, 'secret.txt'), 'secret');
  });
  afterEach(() => rm(base, { recursive: true, force: true }));

  it('refuses to create entries under the upload temp-file prefix (hidden and swept otherwise)', async () => {
    const d = await make();
    const reserved = `${TEMP_PREFIX}mine`;
    const sub = (await d.mkdir(rootObj, 'sub', NO_ARGS)) as Obj;
    const file = (await d.put(rootObj, Readable.from([Buffer.from('x')]), { name: 'f' })) as Obj;
    const attempts = [
      () => d.put(rootObj, Readable.from([Buffer.from('x')]), { name: reserved }),
      () => d.mkdir(rootObj, reserved, NO_ARGS),
      () => d.rename(file, reserved, NO_ARGS),
      () => d.rename(sub, `${TEMP_PREFIX}dir`, NO_ARGS),
    ];
    for (const attempt of attempts) await expect(attempt()).rejects.toMatchObject({ code: 'INVALID', message: expect.stringContaining('is a reserved name') });
    await writeFile(join(root, reserved), 'planted on the host');
    const planted = await d.get(`/${reserved}`, NO_ARGS);
    expect(await codeOf(d.move(planted, sub, NO_ARGS))).toBe('INVALID');
    expect(await codeOf(d.copy(planted, sub, NO_ARGS))).toBe('INVALID');
    expect((await readdir(root)).sort()).toEqual([reserved, 'f', 'sub']);
    expect(await readdir(join(root, 'sub'))).toEqual([]);
  });

  it('init fails without a root_folder_path (never the host root)', async () => {
    for (const addition of [undefined, '{"root_folder_path":""}', '{"root_folder_path":"  "}']) {
      const d = await def.create(parseOptions(def, addition), { log: pino({ level: 'silent' }), dataDir: base });
      await expect(d.init(AbortSignal.timeout(5000))).rejects.toMatchObject({ code: 'INVALID', message: 'root_folder_path is required: the host folder this storage serves' });
    }
  });

  it('init fails with AList\'s message when the root is missing', async () => {
    const d = await def.create(parseOptions(def, { root_folder_path: join(base, 'nope') }), { log: pino({ level: 'silent' }), dataDir: base });
    await expect(d.init(AbortSignal.timeout(5000))).rejects.toThrow(`root folder ${join(base, 'nope')} not exists`);
  });

  it('refuses symlinks leaving the root, for reads and writes', async () => {
    await symlink(outside, join(root, 'out-dir'));
    await symlink(join(outside, 'secret.txt'), join(root, 'out-file'));
    const d = await make();
    expect((await d.list(rootObj, NO_ARGS)).map((o) => o.name)).toEqual([]); // escaping links are not listed
    expect(await codeOf(d.get('/out-file', NO_ARGS))).toBe('FORBIDDEN');
    expect(await codeOf(d.get('/out-dir/secret.txt', NO_ARGS))).toBe('FORBIDDEN');
    const fakeFile = { name: 'out-file', path: '/out-file', size: 6, isDir: false, modified: new Date() };
    const fakeDir = { name: 'out-dir', path: '/out-dir', size: 0, isDir: true, modified: new Date() };
    expect(await codeOf(d.link(fakeFile, NO_ARGS))).toBe('FORBIDDEN');
    expect(await codeOf(d.list(fakeDir, NO_ARGS))).toBe('FORBIDDEN');
    expect(await codeOf(d.put(fakeDir, Readable.from([Buffer.from('x')]), { name: 'planted' }))).toBe('FORBIDDEN');
    expect(await codeOf(d.mkdir(fakeDir, 'planted', NO_ARGS))).toBe('FORBIDDEN');
    expect(await codeOf(d.setModified(fakeFile, new Date(0), NO_ARGS))).toBe('FORBIDDEN');
    expect(await codeOf(d.copy({ ...fakeDir, path: '/out-dir/secret.txt', name: 'secret.txt', isDir: false }, rootObj, NO_ARGS))).toBe('FORBIDDEN');
    expect(await readdir(outside)).toEqual(['secret.txt']);
    expect((await stat(join(outside, 'secret.txt'))).mtimeMs).toBeGreaterThan(0);
  });

  it('sees a folder swapped for a link out of the root by the next operation', async () => {
    // Folder realpaths are remembered within one turn of the event loop (host-path.ts), never longer.
    await mkdir(join(root, 'box'));
    const d = await make();
    expect((await d.get('/box', NO_ARGS)).isDir).toBe(true);
    expect(await codeOf(d.get('/box/secret.txt', NO_ARGS))).toBe('NOT_FOUND');
    await new Promise((r) => setImmediate(r));
    await rm(join(root, 'box'), { recursive: true });
    await symlink(outside, join(root, 'box'));
    expect(await codeOf(d.get('/box/secret.txt', NO_ARGS))).toBe('FORBIDDEN');
    const box = { name: 'box', path: '/box', size: 0, isDir: true, modified: new Date() };
    expect(await codeOf(d.put(box, Readable.from([Buffer.from('x')]), { name: 'planted' }))).toBe('FORBIDDEN');
    expect(await readdir(outside)).toEqual(['secret.txt']);
  });

  it('follows symlinks that stay inside the root', async () => {
    await mkdir(join(root, 'real'));
    await writeFile(join(root, 'real', 'f'), 'inside');
    await symlink(join(root, 'real'), join(root, 'alias'));
    const d = await make();
    expect((await d.list(rootObj, NO_ARGS)).map((o) => [o.name, o.isDir])).toEqual([['alias', true], ['real', true]]);
    const link = await d.link(await d.get('/alias/f', NO_ARGS), NO_ARGS);
    expect((await collect(await openLink(link))).toString()).toBe('inside');
  });

  it('serves only files and folders: a FIFO or socket is not listed, not found, and not replaced by an upload', async () => {
    await writeFile(join(root, 'plain.txt'), 'plain');
    execFileSync('mkfifo', [join(root, 'fifo')]);
    const sock = createServer().listen(join(root, 'sock'));
    await once(sock, 'listening');
    await symlink(join(root, 'fifo'), join(root, 'to-fifo')); // inside the root, to a FIFO
    try {
      const d = await make();
      expect((await d.list(rootObj, NO_ARGS)).map((o) => o.name)).toEqual(['plain.txt']);
      for (const p of ['/fifo', '/sock', '/to-fifo']) expect(await codeOf(d.get(p, NO_ARGS))).toBe('NOT_FOUND');
      // Reading it would block a thread until a writer came; link refuses it even when asked directly.
      const fifoObj: Obj = { name: 'fifo', path: '/fifo', size: 0, isDir: false, modified: new Date() };
      expect(await codeOf(d.link(fifoObj, NO_ARGS))).toBe('NOT_FOUND');
      expect(await codeOf(d.put(rootObj, Readable.from([Buffer.from('x')]), { name: 'fifo', size: 1 }))).toBe('FORBIDDEN');
      expect((await lstat(join(root, 'fifo'))).isFIFO()).toBe(true);
    } finally {
      sock.close();
    }
  });

  it('refuses `..`, backslashes and NUL in driver paths and names', async () => {
    const d = await make();
    expect(await codeOf(d.get('/../outside/secret.txt', NO_ARGS))).toBe('INVALID');
    expect(await codeOf(d.get('/a\\..\\..', NO_ARGS))).toBe('INVALID');
    expect(await codeOf(d.mkdir(rootObj, '..', NO_ARGS))).toBe('INVALID');
    expect(await codeOf(d.put(rootObj, Readable.from([Buffer.from('x')]), { name: '../escape' }))).toBe('INVALID');
    expect(await codeOf(d.put(rootObj, Readable.from([Buffer.from('x')]), { name: 'nul\0byte' }))).toBe('INVALID');
    expect(await readdir(base)).toEqual(['outside', 'root']);
  });

  it('an aborted upload removes its temp file and leaves nothing under the final name', async () => {
    const d = await make();
    await writeFile(join(root, 'keep'), 'old');
    await expect(d.put(rootObj, failing(Buffer.alloc(100_000, 1)), { name: 'keep' })).rejects.toBeTruthy();
    await expect(d.put(rootObj, failing(Buffer.alloc(100_000, 1)), { name: 'new' })).rejects.toBeTruthy();
    expect(await readdir(root)).toEqual(['keep']);
    expect(await readFile(join(root, 'keep'), 'utf8')).toBe('old');
  });

  it('never lists upload temp files, and sweeps those a dead process left behind', async () => {
    const d = await make();
    const stale = join(root, '.treegate-upload-0123456789abcdef01234567');
    const live = join(root, '.treegate-upload-76543210fedcba9876543210');
    await writeFile(stale, 'half an upload');
    await writeFile(live, 'an upload in progress');
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    await utimes(stale, twoHoursAgo, twoHoursAgo);
    await writeFile(join(root, 'plain'), 'p');
    expect((await d.list(rootObj, NO_ARGS)).map((o) => o.name)).toEqual(['plain']);
    expect((await readdir(root)).sort()).toEqual(['.treegate-upload-76543210fedcba9876543210', 'plain']);
  });

  it('moves removed entries to the recycle bin, suffixing clashes', async () => {
    const bin = join(base, 'bin');
    const d = await make({ recycle_bin_path: bin });
    for (let i = 0; i < 2; i++) {
      await writeFile(join(root, 'f'), `v${i}`);
      await d.remove(await d.get('/f', NO_ARGS), NO_ARGS);
    }
    const inBin = (await readdir(bin)).sort();
    expect(inBin[0]).toBe('f');
    expect(inBin[1]).toMatch(/^f_\d{14}$/);
    expect(await readdir(root)).toEqual([]);
  });

  it('hides dot files when show_hidden is off, and applies mkdir_perm', async () => {
    await writeFile(join(root, '.dot'), '');
    await writeFile(join(root, 'plain'), '');
    const d = await make({ show_hidden: false, mkdir_perm: '750' });
    expect((await d.list(rootObj, NO_ARGS)).map((o) => o.name)).toEqual(['plain']);
    await d.mkdir(rootObj, 'perm', NO_ARGS);
    expect((await stat(join(root, 'perm'))).mode & 0o777).toBe(0o750 & ~process.umask());
  });

  it('remove with onlyEmpty counts entries the listing skips (dot files, upload temp files)', async () => {
    for (const f of ['dots/.dot', `temps/${TEMP_PREFIX}live`]) {
      await mkdir(join(root, f, '..'));
      await writeFile(join(root, f), 'x');
    }
    for (const bin of ['', join(base, 'bin')]) {
      const d = await make({ show_hidden: false, recycle_bin_path: bin });
      for (const dir of ['/dots', '/temps']) {
        expect(await d.list(await d.get(dir, NO_ARGS), NO_ARGS)).toEqual([]);
        expect(await codeOf(d.remove(await d.get(dir, NO_ARGS), { onlyEmpty: true }))).toBe('NOT_EMPTY');
      }
    }
    expect((await readdir(root)).sort()).toEqual(['dots', 'temps']);
    expect(await readFile(join(root, 'dots', '.dot'), 'utf8')).toBe('x');
  });

  it('a put into an existing folder judges a link at the target by what it leads to, as a lookup shows it', async () => {
    // Local checks the target itself (checksPutTarget), so the VFS makes no lookup of its own first.
    await mkdir(join(root, 'real'));
    await writeFile(join(root, 'file.txt'), 'old');
    execFileSync('mkfifo', [join(root, 'fifo')]);
    await symlink(join(root, 'real'), join(root, 'to-dir'));
    await symlink(join(root, 'file.txt'), join(root, 'to-file'));
    await symlink(join(root, 'gone'), join(root, 'dangling'));
    await symlink(join(root, 'fifo'), join(root, 'to-fifo'));
    await symlink(join(outside, 'secret.txt'), join(root, 'out'));
    const core = await makeCore();
    try {
      const made = await core.storages.create({ ...storage('/l', 'Local'), addition: JSON.stringify({ root_folder_path: root }) });
      expect(made.error).toBeUndefined();
      const admin = ctx(principal(0xfff));
      const told: Array<[string, boolean]> = [];
      const put = (name: string) => core.vfs.put(admin, `/l/${name}`, body(`new ${name}`), { parents: false, onTarget: (e) => void told.push([name, e]) });
      expect(await codeOf(put('to-dir'))).toBe('IS_A_DIR');
      expect(await codeOf(put('out'))).toBe('FORBIDDEN');
      for (const name of ['to-file', 'dangling', 'to-fifo']) await put(name);
      expect(told).toEqual([['to-file', true], ['dangling', false], ['to-fifo', false]]);
      // The links themselves were replaced; what they led to is untouched.
      for (const name of ['to-file', 'dangling', 'to-fifo']) {
        expect((await lstat(join(root, name))).isFile()).toBe(true);
        expect(await readFile(join(root, name), 'utf8')).toBe(`new ${name}`);
      }
      expect(await readFile(join(root, 'file.txt'), 'utf8')).toBe('old');
      expect((await lstat(join(root, 'fifo'))).isFIFO()).toBe(true);
      expect((await lstat(join(root, 'to-dir'))).isSymbolicLink()).toBe(true);
      expect(await readFile(join(outside, 'secret.txt'), 'utf8')).toBe('secret');
    } finally {
      await core.cleanup();
    }
  });

  it('lists a 20,000-entry folder sorted byte-wise', async () => {
    const names = Array.from({ length: 20_000 }, (_, i) => `n${(i * 7919) % 20_000}`);
    for (let i = 0; i < names.length; i += 500) await Promise.all(names.slice(i, i + 500).map((n) => writeFile(join(root, n), '')));
    await writeFile(join(root, 'Zed'), '');
    await writeFile(join(root, 'énorme'), '');
    const d = await make();
    const listed = (await d.list(rootObj, NO_ARGS)).map((o) => o.name);
    expect(listed.length).toBe(20_002);
    const sorted = [...listed].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    expect(listed).toEqual(sorted);
    expect(listed[0]).toBe('Zed');
    expect(listed[listed.length - 1]).toBe('énorme');
  });
});
