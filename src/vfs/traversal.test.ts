/**
 * Hostile paths against every path-taking VfsApi method over a Local storage: nothing outside the
 * Local root may be read, listed, created, changed or removed, and every failure is a VfsError.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isVfsError } from '../errors.js';
import { collect } from '../../drivers/conformance/helpers.js';
import { body, ctx, makeCore, principal, storage, type TestCore } from './testing.js';

const SECRET = 'TOP-SECRET-CONTENT';

describe('path traversal', () => {
  let core: TestCore;
  let base: string;
  let outside: string;
  let secretMtime: number;
  const hostile: string[] = [];

  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), 'tg-trav-'));
    const root = join(base, 'root');
    outside = join(base, 'outside');
    await mkdir(join(root, 'jail', 'sub'), { recursive: true });
    await mkdir(outside);
    await writeFile(join(outside, 'secret.txt'), SECRET);
    await writeFile(join(root, 'root-only.txt'), SECRET);
    await writeFile(join(root, 'jail', 'victim.txt'), 'victim');
    await symlink(outside, join(root, 'jail', 'escape'));
    await symlink(join(outside, 'secret.txt'), join(root, 'jail', 'escape-file'));
    await symlink('../../../outside', join(root, 'jail', 'sub', 'relative-escape'));
    secretMtime = (await stat(join(outside, 'secret.txt'))).mtimeMs;
    core = await makeCore();
    await core.storages.create({ ...storage('/', 'Local'), addition: JSON.stringify({ root_folder_path: root }) });
    hostile.push(
      '..', '../', '/..', '/../', '../..', '../../..', '/../outside', '../outside/secret.txt', '../../outside/secret.txt',
      '../../../../../../etc/passwd', 'a/../../outside', './../outside', '/sub/../../root-only.txt', '/sub/../..', 'sub/../../../outside',
      '..\\outside', '\\..\\outside', 'sub\\..\\..\\root-only.txt', 'a\\b', '\\', '..\\..\\..\\etc\\passwd',
      'file\0.txt', '\0', '../\0', 'sub/\0/x', '%00', '%2e%2e/%2e%2e/outside', '..%2f..%2foutside', '%2e%2e%5c%2e%2e',
      join(outside, 'secret.txt'), outside, '/etc/passwd', '//etc/passwd', 'C:\\Windows\\win.ini', 'file:///etc/passwd',
      '/escape', '/escape/secret.txt', '/escape/new.txt', '/escape-file', '/escape/../root-only.txt', '/sub/relative-escape',
      '/sub/relative-escape/secret.txt', '/sub/relative-escape/planted', '..\u2215outside', '\uff0e\uff0e/outside', '...', '.../outside',
      ' ..', '.. /x', 'x'.repeat(300), '/sub/' + 'y'.repeat(256) + '/z',
    );
  });
  afterAll(async () => {
    await core.cleanup();
    await rm(base, { recursive: true, force: true });
  });

  const jailed = ctx(principal(0xfff, '/jail'), 'sftp');

  it(`uses at least 40 hostile inputs`, () => {
    expect(hostile.length).toBeGreaterThanOrEqual(40);
  });

  it('never reads, lists, writes or removes outside the root or the base path', async () => {
    const vfs = core.vfs;
    const ops: Array<[string, (p: string) => Promise<unknown>]> = [
      ['stat', (p) => vfs.stat(jailed, p)],
      ['list', (p) => vfs.list(jailed, p)],
      ['facts', (p) => vfs.facts(jailed, p)],
      ['storageOf', (p) => vfs.storageOf(jailed, p)],
      ['read', async (p) => collect((await vfs.read(jailed, p)).stream)],
      ['read-range', async (p) => collect((await vfs.read(jailed, p, { start: 0, end: 5 })).stream)],
      ['link', (p) => vfs.link(jailed, p)],
      ['usage', (p) => vfs.usage(jailed, p)],
      ['mkdir', (p) => vfs.mkdir(jailed, p)],
      ['put', (p) => vfs.put(jailed, p, body('planted'))],
      ['setModified', (p) => vfs.setModified(jailed, p, new Date(0))],
      ['move-src', (p) => vfs.moveTo(jailed, p, '/moved-here')],
      ['move-dst', async (p) => {
        await vfs.put(jailed, '/mover.txt', body('m'));
        return vfs.moveTo(jailed, '/mover.txt', p);
      }],
      ['copy-src', (p) => vfs.copyTo(jailed, p, '/copied-here')],
      ['copy-dst', (p) => vfs.copyTo(jailed, '/victim.txt', p)],
      ['remove', (p) => vfs.remove(jailed, p)],
    ];
    for (const input of hostile) {
      for (const [name, op] of ops) {
        let result: unknown;
        try {
          result = await op(input);
        } catch (e) {
          if (!isVfsError(e)) throw new Error(`${name}(${JSON.stringify(input)}) threw a non-VfsError: ${e}`);
          continue;
        }
        const text = Buffer.isBuffer(result) ? result.toString() : JSON.stringify(result ?? null);
        expect(text, `${name}(${JSON.stringify(input)})`).not.toContain(SECRET);
        // every path the VFS reports stays inside the user's base path
        for (const m of text.matchAll(/"vpath":"([^"]*)"/g)) expect(m[1]!.startsWith('/jail'), `${name}(${JSON.stringify(input)}) → ${m[1]}`).toBe(true);
        expect(text, `${name}(${JSON.stringify(input)})`).not.toContain('root-only');
        // clean up harmless in-root results so later inputs start from the same state
        await rm(join(base, 'root', 'jail', 'moved-here'), { recursive: true, force: true });
        await rm(join(base, 'root', 'jail', 'copied-here'), { recursive: true, force: true });
      }
    }
    expect(await readdir(outside)).toEqual(['secret.txt']);
    expect(await readFile(join(outside, 'secret.txt'), 'utf8')).toBe(SECRET);
    expect((await stat(join(outside, 'secret.txt'))).mtimeMs).toBe(secretMtime);
    expect((await readdir(base)).sort()).toEqual(['outside', 'root']);
    expect((await readdir(join(base, 'root'))).sort()).toEqual(['jail', 'root-only.txt']);
    expect(await readFile(join(base, 'root', 'root-only.txt'), 'utf8')).toBe(SECRET);
  });

  it('refuses `..` with AList\'s message', async () => {
    await expect(core.vfs.stat(jailed, '../root-only.txt')).rejects.toMatchObject({ code: 'INVALID', message: 'access using relative path is not allowed' });
  });
});
