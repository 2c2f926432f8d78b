/**
 * The Alias driver against a small TreeAccess built on the Memory driver (the server does not wire
 * DriverContext.tree yet). The fake follows the VFS contract the real wiring must keep: mkdir is
 * "mkdir -p", moveTo/copyTo take the full destination path and refuse a taken name with EXISTS.
 */
import { Readable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { VfsError } from '../../src/errors.js';
import { basename, parent, segments } from '../../src/paths.js';
import { parseOptions } from '../options.js';
import { runConformance } from '../conformance/suite.js';
import { codeOf, collect, names, NO_ARGS, rootObj } from '../conformance/helpers.js';
import { openLink } from '../../src/vfs/link.js';
import { MemoryDriver } from '../memory/memory.js';
import type { CallArgs, Driver, DriverDefinition, PutArgs, TreeAccess } from '../types.js';
import { aliasDefinition } from './index.js';

const def = aliasDefinition as unknown as DriverDefinition;
const log = pino({ level: 'silent' });

function fakeTree(m: MemoryDriver): TreeAccess {
  const at = (p: string) => m.get(p);
  const tree: TreeAccess = {
    stat: (p) => at(p),
    list: async (p) => m.list(await at(p)),
    link: async (p) => m.link(await at(p)),
    thumbnail: async () => undefined, // Memory makes none
    mkdir: async (p: string, a: CallArgs) => {
      let cur = rootObj;
      for (const s of segments(p)) {
        const next = (await m.list(cur)).find((o) => o.name === s);
        if (next && !next.isDir) throw new VfsError('EXISTS', 'file exists');
        cur = next ?? (await m.mkdir(cur, s, a));
      }
      return cur;
    },
    moveTo: async (src, dst) => {
      const o = await at(src);
      if (parent(src) === parent(dst)) return m.rename(o, basename(dst));
      const moved = await m.move(o, await at(parent(dst)));
      return basename(dst) === o.name ? moved : m.rename(moved, basename(dst));
    },
    copyTo: async (src, dst) => m.copy(await at(src), await at(parent(dst))),
    remove: async (p, a) => m.remove(await at(p), a),
    put: async (p, stream, args: Omit<PutArgs, 'name'>) => m.put(await at(parent(p)), stream, { ...args, name: basename(p) }),
    setModified: async (p, d) => m.setModified(await at(p), d),
  };
  return tree;
}

async function world() {
  const m = new MemoryDriver();
  for (const d of ['target', 'a', 'b']) await m.mkdir(rootObj, d, NO_ARGS);
  await m.put(await m.get('/a'), Readable.from([Buffer.from('from a')]), { name: 'same.txt' });
  await m.put(await m.get('/b'), Readable.from([Buffer.from('from b')]), { name: 'same.txt' });
  await m.put(await m.get('/b'), Readable.from([Buffer.from('only b')]), { name: 'b-only.txt' });
  return { m, tree: fakeTree(m) };
}

const withTree = (tree: TreeAccess): DriverDefinition => ({ ...def, create: (o, ctx) => def.create(o, { ...ctx, tree }) });

async function make(tree: TreeAccess, addition: Record<string, unknown>): Promise<Driver> {
  const d = await def.create(parseOptions(def, addition), { log, dataDir: '/x', tree });
  await d.init(AbortSignal.timeout(1000));
  return d;
}

describe('Alias over a fake tree (memory driver)', async () => {
  const shared = await world();
  runConformance(withTree(shared.tree), async () => ({ options: parseOptions(def, { paths: '/target', writable: true }), cleanup: async () => undefined }));

  it('shows one folder per name, and merges targets that share a name', async () => {
    const { tree } = await world();
    const two = await make(tree, { paths: '/a\nsecond:/b' });
    expect(await names(two, '/')).toEqual(['a', 'second']);
    expect(await names(two, '/second')).toEqual(['b-only.txt', 'same.txt']);
    const merged = await make(tree, { paths: 'docs:/a\ndocs:/b' });
    expect((await names(merged, '/')).sort()).toEqual(['b-only.txt', 'same.txt']);
    const link = await merged.link(await merged.get!('/same.txt', NO_ARGS), NO_ARGS);
    expect((await collect(await openLink(link))).toString()).toBe('from a');
  });

  it('is read-only unless writable; protect_same_name guards merged names', async () => {
    const { tree, m } = await world();
    const ro = await make(tree, { paths: 'docs:/a\ndocs:/b' });
    expect(ro.put ?? ro.remove ?? ro.mkdir ?? ro.rename).toBeUndefined();
    const rw = (await make(tree, { paths: 'docs:/a\ndocs:/b', writable: true })) as Required<Driver>;
    const same = await rw.get('/same.txt', NO_ARGS);
    expect(await codeOf(rw.remove(same, NO_ARGS))).toBe('FORBIDDEN');
    await rw.remove(await rw.get('/b-only.txt', NO_ARGS), NO_ARGS);
    expect((await m.list(await m.get('/b'))).map((o) => o.name)).toEqual(['same.txt']);
    const loose = (await make(tree, { paths: 'docs:/a\ndocs:/b', writable: true, protect_same_name: false })) as Required<Driver>;
    await loose.remove(same, NO_ARGS);
    expect((await m.list(await m.get('/a'))).map((o) => o.name)).toEqual([]);
  });

  it('refuses targets that lead back into the alias, and fails init without a tree', async () => {
    const { m } = await world();
    const base = fakeTree(m);
    const holder: { alias?: Driver } = {};
    // A tree where /loop is served by the alias itself (as a mount of it would be).
    const loopy: TreeAccess = {
      ...base,
      stat: (p) => (p.startsWith('/loop') ? holder.alias!.get!(p.slice(5) || '/', NO_ARGS) : base.stat(p, NO_ARGS)),
      list: async (p, a) => (p.startsWith('/loop') ? holder.alias!.list(await holder.alias!.get!(p.slice(5) || '/', a), a) : base.list(p, a)),
    };
    holder.alias = await make(loopy, { paths: '/loop' });
    expect(await codeOf(holder.alias.list(rootObj, NO_ARGS))).toBe('INVALID');
    const orphan = await def.create(parseOptions(def, { paths: '/a' }), { log, dataDir: '/x' });
    await expect(orphan.init(AbortSignal.timeout(1000))).rejects.toThrow(/virtual tree/);
  });
});

it('declares AList 3.45 Alias options', () => {
  expect(def.options.map((o) => [o.name, o.type, o.default ?? '', o.required ?? false])).toEqual([
    ['paths', 'text', '', true], ['protect_same_name', 'bool', 'true', false], ['download_concurrency', 'number', '0', false],
    ['download_part_size', 'number', '0', false], ['writable', 'bool', 'false', false],
  ]);
});

