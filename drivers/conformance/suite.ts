/**
 * The shared driver conformance suite. A driver's test file runs it in a few lines:
 *
 *   runConformance(myDefinition, async () => ({ options: {...}, cleanup: async () => {...} }));
 *
 * Every case works in its own fresh folder under the storage root. A case that needs an optional
 * method the driver lacks (per `capabilitiesOf`) checks instead what a user of that storage meets:
 * the VFS refuses the operation with NOT_SUPPORTED and changes nothing. Backend limits are read from
 * `def.conformance` (noMtime, noEmptyDirs, unsupportedNames) and checked as declared limits. So every
 * case runs and asserts something on every driver; none is skipped. Nothing here looks at a
 * driver's name.
 */
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { capabilitiesOf, type Capabilities, type Driver, type DriverDefinition, type Obj } from '../types.js';
import { chunked, codeOf, collect, failing, names, NO_ARGS, objAt, readAll, rootObj } from './helpers.js';
import { ctx, makeCore, principal, storage } from '../../src/vfs/testing.js';

// The VFS types as src/vfs/testing.ts hands them out (drivers import no other part of the core).
type VfsApi = Awaited<ReturnType<typeof makeCore>>['vfs'];
type AccessContext = ReturnType<typeof ctx>;

export interface ConformanceSetup {
  options: Record<string, unknown>;
  cleanup: () => Promise<void>;
  /**
   * Name cases the test server (not the backend the driver is for) cannot hold as written, each
   * with the closest name it can hold, used instead (say why where this is set).
   */
  testServerNames?: Record<string, string>;
}

/** Name cases, keyed by the id a definition may list in conformance.unsupportedNames. */
export const NAME_CASES: Record<string, string> = {
  spaces: 'with  some spaces .txt',
  nfc: 'caf\u00e9.txt',
  nfd: 'cafe\u0301.txt',
  percent: '100% sure %41.txt',
  hash: 'issue #12.txt',
  'leading-dot': '.hidden-file',
  unicode: '日本語 ✓ 🎉.txt',
  // 244 bytes in UTF-8 (84 characters): near the usual 255-byte limit, so any temp name must be cut by bytes.
  'long-cjk': '漢'.repeat(80) + '.txt',
};

export function runConformance(def: DriverDefinition, makeOptions: () => Promise<ConformanceSetup>): void {
  describe(`driver conformance: ${def.config.name}`, () => {
    let driver: Driver;
    let caps: Capabilities;
    let setup: ConformanceSetup;
    let n = 0;
    const conf = def.conformance ?? {};

    beforeAll(async () => {
      setup = await makeOptions();
      driver = await def.create(setup.options as never, { log: pino({ level: 'silent' }), dataDir: '/nonexistent' });
      await driver.init(AbortSignal.timeout(15_000));
      caps = capabilitiesOf(driver, def.config);
    });
    afterAll(async () => {
      await driver?.drop();
      await setup?.cleanup();
    });

    /** A fresh folder for one case. */
    const fresh = async (): Promise<Obj> => {
      const name = `case-${++n}-${randomBytes(3).toString('hex')}`;
      return (await driver.mkdir!(rootObj, name, NO_ARGS)) || objAt(driver, '/' + name);
    };
    const put = async (dir: Obj, name: string, data: Buffer, extra: { size?: number | null; modified?: Date } = {}) => {
      const size = extra.size === null ? undefined : extra.size ?? data.length;
      await driver.put!(dir, chunked(data, Math.max(7, Math.ceil(data.length / 64))), { name, size, modified: extra.modified });
      return objAt(driver, `${dir.path}/${name}`);
    };
    const mkdirIn = async (at: Obj, name: string) => (await driver.mkdir!(at, name, NO_ARGS)) || (await objAt(driver, `${at.path}/${name}`));

    /** Runs `fn` with a VFS mounting this very driver at /s, as an admin. */
    const withVfs = async (fn: (vfs: VfsApi, admin: AccessContext) => Promise<void>) => {
      // A Memory driver's objects live in its instance, so the VFS gets this one; the suite keeps its lifecycle.
      const view = new Proxy(driver, {
        get: (d, key) => (key === 'init' || key === 'drop' ? async () => undefined : typeof Reflect.get(d, key) === 'function' ? Reflect.get(d, key).bind(d) : Reflect.get(d, key)),
      });
      const core = await makeCore([{ ...def, create: () => view }]);
      try {
        const made = await core.storages.create({ ...storage('/s', def.config.name), addition: JSON.stringify(setup.options) });
        expect(made.error).toBeUndefined();
        await fn(core.vfs, ctx(principal(0xfff)));
      } finally {
        await core.cleanup();
      }
    };

    /** What a user of the storage meets when the driver lacks `cap`: NOT_SUPPORTED, and nothing changed. */
    const refusedWithout = async (cap: keyof Capabilities) => {
      if (cap === 'canUsage') return withVfs(async (vfs, admin) => expect(await vfs.usage(admin, '/s')).toEqual({}));
      const transfer = { canRename: ['moveTo', 'b'], canMove: ['moveTo', 'to/a'], canCopy: ['copyTo', 'to/a'] } as const;
      if (!(cap in transfer)) throw new Error(`the suite has no check of what the VFS does without ${cap}`);
      const [op, target] = transfer[cap as keyof typeof transfer];
      const dir = await fresh();
      await put(dir, 'a', Buffer.from('A'));
      await mkdirIn(dir, 'to');
      await withVfs(async (vfs, admin) => {
        expect(await codeOf(vfs[op](admin, `/s${dir.path}/a`, `/s${dir.path}/${target}`))).toBe('NOT_SUPPORTED');
      });
      expect((await names(driver, dir.path)).sort()).toEqual(['a', 'to']);
      expect(await names(driver, `${dir.path}/to`)).toEqual([]);
      expect((await readAll(driver, `${dir.path}/a`)).toString()).toBe('A');
    };

    /**
     * Whether the driver lacks any of `keys`; a case then returns at once, having checked with
     * refusedWithout what the VFS does without each. Mkdir and put are needed by every case: a
     * driver without them fails here until the suite learns what to check for it.
     */
    const lacks = async (...keys: Array<keyof Capabilities>): Promise<boolean> => {
      const missing = keys.filter((k) => !caps[k]);
      for (const k of missing) await refusedWithout(k);
      return missing.length > 0;
    };

    it('lists the root and reports missing paths as NOT_FOUND', async () => {
      expect(Array.isArray(await driver.list(rootObj, NO_ARGS))).toBe(true);
      if (caps.canGet) {
        const root = await driver.get!('/', NO_ARGS);
        expect(root.isDir).toBe(true);
        expect(await codeOf(driver.get!('/no-such-entry-here', NO_ARGS))).toBe('NOT_FOUND');
      }
      expect(await codeOf(driver.list({ ...rootObj, name: 'x', path: '/no-such-dir-here' }, NO_ARGS))).toBe('NOT_FOUND');
    });

    it('mkdir creates folders; EXISTS over an entry; NOT_A_DIR under a file', async () => {
      if (await lacks('canMkdir', 'canPut')) return;
      const dir = await fresh();
      const sub = (await driver.mkdir!(dir, 'sub', NO_ARGS)) || (await objAt(driver, `${dir.path}/sub`));
      expect(sub.isDir).toBe(true);
      expect(await names(driver, dir.path)).toEqual(['sub']);
      expect(await codeOf(driver.mkdir!(dir, 'sub', NO_ARGS))).toBe('EXISTS');
      const file = await put(dir, 'f', Buffer.from('x'));
      expect(await codeOf(driver.mkdir!(dir, 'f', NO_ARGS))).toBe('EXISTS');
      expect(await codeOf(driver.mkdir!(file, 'below', NO_ARGS))).toBe('NOT_A_DIR');
      expect(await codeOf(driver.list(file, NO_ARGS))).toBe('NOT_A_DIR');
    });

    it('put streams bytes in; get, list and link agree; ranges read the right bytes', async () => {
      if (await lacks('canMkdir', 'canPut')) return;
      const dir = await fresh();
      const data = randomBytes(100_003);
      const obj = await put(dir, 'blob.bin', data);
      expect(obj).toMatchObject({ name: 'blob.bin', size: data.length, isDir: false });
      expect((await driver.list(dir, NO_ARGS)).map((o) => [o.name, o.size])).toEqual([['blob.bin', data.length]]);
      expect((await readAll(driver, obj.path)).equals(data)).toBe(true);
      expect((await readAll(driver, obj.path, { start: 10, end: 19 })).equals(data.subarray(10, 20))).toBe(true);
      expect((await readAll(driver, obj.path, { start: 99_000 })).equals(data.subarray(99_000))).toBe(true);
      expect((await readAll(driver, obj.path, { start: 0, end: 0 })).equals(data.subarray(0, 1))).toBe(true);
    });

    it('put handles zero-length bodies, unknown lengths and overwrites', async () => {
      if (await lacks('canMkdir', 'canPut')) return;
      const dir = await fresh();
      expect((await put(dir, 'empty', Buffer.alloc(0))).size).toBe(0);
      expect((await readAll(driver, `${dir.path}/empty`)).length).toBe(0);
      const unknown = Buffer.from('length not announced');
      expect((await put(dir, 'unknown', unknown, { size: null })).size).toBe(unknown.length);
      await put(dir, 'unknown', Buffer.from('v2'));
      expect((await readAll(driver, `${dir.path}/unknown`)).toString()).toBe('v2');
      expect((await names(driver, dir.path)).sort()).toEqual(['empty', 'unknown']);
    });

    it('put with noReplace is EXISTS on a taken name and leaves that file and the folder as they were', async () => {
      // The driver is called directly, as when another upload took the name while this one's body
      // was coming (the VFS refuses a name already taken when the put begins).
      if (await lacks('canMkdir', 'canPut')) return;
      const dir = await fresh();
      await put(dir, 'taken', Buffer.from('first'));
      const body = Buffer.from('second, must not land');
      expect(await codeOf(driver.put!(dir, chunked(body, 7), { name: 'taken', size: body.length, noReplace: true }))).toBe('EXISTS');
      expect((await readAll(driver, `${dir.path}/taken`)).toString()).toBe('first');
      expect(await names(driver, dir.path)).toEqual(['taken']);
      await driver.put!(dir, chunked(body, 7), { name: 'free', size: body.length, noReplace: true });
      expect((await readAll(driver, `${dir.path}/free`)).toString()).toBe(body.toString());
    });

    it('put over a folder is IS_A_DIR; link of a folder is IS_A_DIR', async () => {
      if (await lacks('canMkdir', 'canPut')) return;
      const dir = await fresh();
      const sub = (await driver.mkdir!(dir, 'd', NO_ARGS)) || (await objAt(driver, `${dir.path}/d`));
      expect(await codeOf(driver.put!(dir, Readable.from([Buffer.from('x')]), { name: 'd' }))).toBe('IS_A_DIR');
      expect(await codeOf(driver.link(sub, NO_ARGS))).toBe('IS_A_DIR');
    });

    it('a put into an existing folder (parents: false) answers before reading the body, with or without checksPutTarget', async () => {
      if (await lacks('canMkdir', 'canPut')) return;
      const dir = await fresh();
      await put(dir, 'taken', Buffer.from('first'));
      await mkdirIn(dir, 'd');
      /** A body that records when it is first read, and what onTarget was told by then. */
      const watched = (text: string) => {
        const seen: { told: boolean[]; toldBeforeRead?: boolean[] } = { told: [] };
        const body = new Readable({
          read() {
            seen.toldBeforeRead ??= [...seen.told];
            this.push(Buffer.from(text));
            this.push(null);
          },
        });
        return { body, seen, onTarget: (existed: boolean) => void seen.told.push(existed) };
      };
      await withVfs(async (vfs, admin) => {
        const v = (p: string) => `/s${dir.path}/${p}`;
        for (const [path, overwrite, code] of [['missing/f', true, 'NOT_A_DIR'], ['taken/f', true, 'NOT_A_DIR'], ['d', true, 'IS_A_DIR'], ['taken', false, 'EXISTS']] as const) {
          const w = watched('must not land');
          expect(await codeOf(vfs.put(admin, v(path), w.body, { parents: false, overwrite, onTarget: w.onTarget }))).toBe(code);
          expect(w.seen).toEqual({ told: [] }); // refused before the body was read
        }
        for (const [name, existed] of [['new', false], ['taken', true]] as const) {
          const w = watched(`${name} v2`);
          await vfs.put(admin, v(name), w.body, { parents: false, onTarget: w.onTarget });
          expect(w.seen).toEqual({ told: [existed], toldBeforeRead: [existed] });
        }
      });
      expect((await names(driver, dir.path)).sort()).toEqual(['d', 'new', 'taken']);
      expect([(await readAll(driver, `${dir.path}/new`)).toString(), (await readAll(driver, `${dir.path}/taken`)).toString()]).toEqual(['new v2', 'taken v2']);
      expect(await names(driver, `${dir.path}/d`)).toEqual([]);
    });

    it('put sets the mtime it is given (with noMtime: takes it without failing), and setModified changes it', async () => {
      if (await lacks('canMkdir', 'canPut')) return;
      const dir = await fresh();
      const when = new Date('2021-03-04T05:06:07Z');
      const obj = await put(dir, 'dated', Buffer.from('x'), { modified: when });
      if (conf.noMtime) {
        // The backend keeps its own time: the upload still lands whole, with a valid time.
        expect(Number.isFinite(obj.modified.getTime())).toBe(true);
        expect((await readAll(driver, obj.path)).toString()).toBe('x');
        return;
      }
      expect(Math.abs(obj.modified.getTime() - when.getTime())).toBeLessThan(1000);
      if (caps.canSetModified) {
        const later = new Date('2022-01-02T03:04:05Z');
        await driver.setModified!(obj, later, NO_ARGS);
        expect(Math.abs((await objAt(driver, obj.path)).modified.getTime() - later.getTime())).toBeLessThan(1000);
      }
    });

    it('an aborted or failed put leaves nothing behind', async () => {
      if (await lacks('canMkdir', 'canPut')) return;
      const dir = await fresh();
      await expect(driver.put!(dir, failing(randomBytes(5000)), { name: 'broken' })).rejects.toBeTruthy();
      const ac = new AbortController();
      const slow = Readable.from((async function* () {
        yield randomBytes(1000);
        ac.abort();
        await new Promise((r) => setTimeout(r, 20));
        yield randomBytes(1000);
      })(), { objectMode: false });
      await expect(driver.put!(dir, slow, { name: 'aborted', signal: ac.signal })).rejects.toBeTruthy();
      await expect(driver.put!(dir, chunked(Buffer.from('short')), { name: 'short', size: 99 })).rejects.toBeTruthy();
      expect(await names(driver, dir.path)).toEqual([]);
    });

    for (const [id, caseName] of Object.entries(NAME_CASES)) {
      it(`names: ${id} (${JSON.stringify(caseName)}) round-trip through put, list and read (where declared unsupported: fail cleanly)`, async () => {
        if (await lacks('canMkdir', 'canPut')) return;
        const name = setup.testServerNames?.[id] ?? caseName;
        const dir = await fresh();
        // A name the backend is declared not to hold still either lands readable or fails, and
        // never leaves a leftover or a mangled name behind.
        if (conf.unsupportedNames?.[id]) {
          const stored = await driver.put!(dir, chunked(Buffer.from(id)), { name, size: id.length }).then(() => true, () => false);
          if (stored) expect((await readAll(driver, `${dir.path}/${name}`)).toString()).toBe(id);
          expect((await names(driver, dir.path)).filter((x) => x !== name)).toEqual([]);
          return;
        }
        const sub = (await driver.mkdir!(dir, name, NO_ARGS)) || (await objAt(driver, `${dir.path}/${name}`));
        await put(sub, name, Buffer.from(id));
        expect(await names(driver, dir.path)).toEqual([name]);
        expect(await names(driver, sub.path)).toEqual([name]);
        expect((await readAll(driver, `${sub.path}/${name}`)).toString()).toBe(id);
      });
    }

    it('rename renames files and folders; EXISTS onto a taken name (without the method: NOT_SUPPORTED)', async () => {
      if (await lacks('canMkdir', 'canPut', 'canRename')) return;
      const dir = await fresh();
      const a = await put(dir, 'a', Buffer.from('A'));
      await put(dir, 'b', Buffer.from('B'));
      expect(await codeOf(driver.rename!(a, 'b', NO_ARGS))).toBe('EXISTS');
      await driver.rename!(a, 'c', NO_ARGS);
      expect((await names(driver, dir.path)).sort()).toEqual(['b', 'c']);
      expect((await readAll(driver, `${dir.path}/c`)).toString()).toBe('A');
      const sub = (await driver.mkdir!(dir, 'sub', NO_ARGS)) || (await objAt(driver, `${dir.path}/sub`));
      await put(sub, 'inner', Buffer.from('I'));
      await driver.rename!(sub, 'sub2', NO_ARGS);
      expect((await readAll(driver, `${dir.path}/sub2/inner`)).toString()).toBe('I');
      expect(await codeOf(driver.rename!({ ...a, path: `${dir.path}/gone`, name: 'gone' }, 'x', NO_ARGS))).toBe('NOT_FOUND');
    });

    it('move moves files and folders; EXISTS when taken; never into itself (without the method: NOT_SUPPORTED)', async () => {
      if (await lacks('canMkdir', 'canPut', 'canMove')) return;
      const dir = await fresh();
      const f = await put(dir, 'f', Buffer.from('F'));
      const to = (await driver.mkdir!(dir, 'to', NO_ARGS)) || (await objAt(driver, `${dir.path}/to`));
      await driver.move!(f, to, NO_ARGS);
      expect(await names(driver, dir.path)).toEqual(['to']);
      expect((await readAll(driver, `${dir.path}/to/f`)).toString()).toBe('F');
      const g = await put(dir, 'f', Buffer.from('G'));
      expect(await codeOf(driver.move!(g, to, NO_ARGS))).toBe('EXISTS');
      const inner = (await driver.mkdir!(to, 'inner', NO_ARGS)) || (await objAt(driver, `${to.path}/inner`));
      expect(await codeOf(driver.move!(to, inner, NO_ARGS))).toBe('INVALID');
      const d2 = (await driver.mkdir!(dir, 'd2', NO_ARGS)) || (await objAt(driver, `${dir.path}/d2`));
      await driver.move!(await objAt(driver, to.path), d2, NO_ARGS);
      expect((await readAll(driver, `${dir.path}/d2/to/f`)).toString()).toBe('F');
    });

    it('a move under a new name through the VFS works whenever the target name is free (without the method: NOT_SUPPORTED)', async () => {
      if (await lacks('canMkdir', 'canPut', 'canMove', 'canRename')) return;
      const dir = await fresh();
      const [ma, mb] = [await mkdirIn(dir, 'ma'), await mkdirIn(dir, 'mb')];
      for (const [at, name, text] of [[ma, 'x', 'X'], [ma, 'y', 'Y'], [mb, 'x', 'BX'], [ma, 'f', 'F'], [ma, 'h', 'H'], [mb, 'h', 'BH']] as const) {
        await put(at, name, Buffer.from(text));
      }
      const dx = await mkdirIn(ma, 'dx');
      await put(dx, 'in', Buffer.from('IN'));
      await mkdirIn(ma, 'dy');
      await mkdirIn(mb, 'dx');
      await withVfs(async (vfs, admin) => {
        const v = (p: string) => `/s${dir.path}/${p}`;
        await vfs.moveTo(admin, v('ma/f'), v('mb/g')); // old name free in the target folder
        await vfs.moveTo(admin, v('ma/h'), v('mb/k')); // new name free in the source folder
        await vfs.moveTo(admin, v('ma/x'), v('mb/y')); // taken on both sides: a temporary name
        await vfs.moveTo(admin, v('ma/dx'), v('mb/dy'));
      });
      expect((await names(driver, ma.path)).sort()).toEqual(['dy', 'y']);
      expect((await names(driver, mb.path)).sort()).toEqual(['dx', 'dy', 'g', 'h', 'k', 'x', 'y']);
      const read = async (p: string) => (await readAll(driver, `${dir.path}/${p}`)).toString();
      expect([await read('mb/g'), await read('mb/k'), await read('mb/y'), await read('mb/x'), await read('ma/y'), await read('mb/dy/in')])
        .toEqual(['F', 'H', 'X', 'BX', 'Y', 'IN']);
    });

    it('copy copies files and whole trees; EXISTS when taken (without the method: NOT_SUPPORTED)', async () => {
      if (await lacks('canMkdir', 'canPut', 'canCopy')) return;
      const dir = await fresh();
      const src = (await driver.mkdir!(dir, 'src', NO_ARGS)) || (await objAt(driver, `${dir.path}/src`));
      await put(src, 'one', Buffer.from('1'));
      const deep = (await driver.mkdir!(src, 'deep', NO_ARGS)) || (await objAt(driver, `${src.path}/deep`));
      await put(deep, 'two', Buffer.from('2'));
      const dst = (await driver.mkdir!(dir, 'dst', NO_ARGS)) || (await objAt(driver, `${dir.path}/dst`));
      await driver.copy!(src, dst, NO_ARGS);
      expect((await readAll(driver, `${dir.path}/dst/src/deep/two`)).toString()).toBe('2');
      expect((await readAll(driver, `${dir.path}/src/deep/two`)).toString()).toBe('2');
      expect(await codeOf(driver.copy!(await objAt(driver, src.path), dst, NO_ARGS))).toBe('EXISTS');
      expect(await codeOf(driver.copy!(await objAt(driver, src.path), deep, NO_ARGS))).toBe('INVALID');
      await driver.copy!(await objAt(driver, `${src.path}/one`), dst, NO_ARGS);
      expect((await readAll(driver, `${dir.path}/dst/one`)).toString()).toBe('1');
    });

    it('remove deletes files and whole trees; NOT_FOUND when missing', async () => {
      if (await lacks('canMkdir', 'canPut', 'canRemove')) return;
      const dir = await fresh();
      const f = await put(dir, 'f', Buffer.from('x'));
      const sub = (await driver.mkdir!(dir, 'sub', NO_ARGS)) || (await objAt(driver, `${dir.path}/sub`));
      await put(sub, 'g', Buffer.from('y'));
      await driver.remove!(f, NO_ARGS);
      await driver.remove!(await objAt(driver, sub.path), NO_ARGS);
      expect(await names(driver, dir.path)).toEqual([]);
      expect(await codeOf(driver.remove!(f, NO_ARGS))).toBe('NOT_FOUND');
    });

    it('remove with onlyEmpty refuses a folder holding anything (NOT_EMPTY), removes an empty one', async () => {
      if (await lacks('canMkdir', 'canPut', 'canRemove')) return;
      const dir = await fresh();
      const full = (await driver.mkdir!(dir, 'full', NO_ARGS)) || (await objAt(driver, `${dir.path}/full`));
      await put(full, 'keep', Buffer.from('k'));
      expect(await codeOf(driver.remove!(full, { onlyEmpty: true }))).toBe('NOT_EMPTY');
      expect((await readAll(driver, `${full.path}/keep`)).toString()).toBe('k');
      await driver.remove!(await objAt(driver, `${full.path}/keep`), { onlyEmpty: true });
      await driver.remove!(await objAt(driver, full.path), { onlyEmpty: true });
      expect(await names(driver, dir.path)).toEqual([]);
    });

    it('mkdir, put, copy and move into a missing folder are NOT_FOUND (or make it); under a file NOT_A_DIR', async () => {
      if (await lacks('canMkdir', 'canPut')) return;
      const dir = await fresh();
      const file = await put(dir, 'f', Buffer.from('x'));
      const gone: Obj = { ...dir, name: 'gone', path: `${dir.path}/gone` };
      // Backends with implied folders (S3 prefixes, a WebDAV server's create_full_put_path) may make the folder instead.
      expect(['NOT_FOUND', '']).toContain(await codeOf(driver.mkdir!(gone, 'sub', NO_ARGS)));
      expect(['NOT_FOUND', '']).toContain(await codeOf(driver.put!(gone, chunked(Buffer.from('y')), { name: 'g', size: 1 })));
      expect(await codeOf(driver.put!(file, chunked(Buffer.from('y')), { name: 'g', size: 1 }))).toBe('NOT_A_DIR');
      if (caps.canGet) expect(['NOT_FOUND', 'NOT_A_DIR']).toContain(await codeOf(driver.get!(`${file.path}/below`, NO_ARGS)));
      const copied = caps.canCopy ? await codeOf(driver.copy!(file, gone, NO_ARGS)) : 'NOT_FOUND';
      expect(['NOT_FOUND', '']).toContain(copied);
      if (caps.canMove && copied) expect(['NOT_FOUND', '']).toContain(await codeOf(driver.move!(file, gone, NO_ARGS)));
      expect((await names(driver, dir.path)).filter((x) => x !== 'gone')).toEqual(['f']);
      expect((await readAll(driver, file.path).catch(() => readAll(driver, `${gone.path}/f`))).toString()).toBe('x');
    });

    it('usage reports numbers when supported (else the VFS reports none)', async () => {
      if (await lacks('canUsage')) return;
      const u = await driver.usage!(NO_ARGS);
      for (const v of [u.total, u.free, u.used]) if (v !== undefined) expect(Number.isFinite(v)).toBe(true);
    });

    it('large files read by range through openLink', async () => {
      if (await lacks('canMkdir', 'canPut')) return;
      const dir = await fresh();
      const data = randomBytes(3 * 1024 * 1024 + 5);
      const obj = await put(dir, 'big', data);
      const link = await driver.link(obj, NO_ARGS);
      expect(link.kind === 'url' || link.size === data.length).toBe(true);
      const { openLink } = await import('../../src/vfs/link.js');
      expect((await collect(await openLink(link, { start: 1024 * 1024, end: 2 * 1024 * 1024 - 1 }))).equals(data.subarray(1024 * 1024, 2 * 1024 * 1024))).toBe(true);
    });
  });
}
