/**
 * Symbolic links that loop back, on remote storages (code review): SFTP and FTP list a link to a
 * folder as a folder, so every walk of the tree (a folder copy task to another storage, search
 * indexing) followed `loop -> .` and `up -> ..` at every level, spawning 2^depth tasks. Against a
 * real OpenSSH sshd and vsftpd on loopback.
 */
import { mkdir, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';
import { addLocalStorage, boundedCopy } from './tasks-helpers.js';

/** The client methods that ask a server for a real path: SFTP REALPATH, FTP PWD. */
const require = createRequire(import.meta.url);
const realpathOf = {
  SFTP: (require('ssh2/lib/protocol/SFTP.js') as { SFTP: { prototype: Record<string, unknown> } }).SFTP.prototype,
  FTP: (require('basic-ftp') as { Client: { prototype: Record<string, unknown> } }).Client.prototype,
};
const METHOD = { SFTP: 'realpath', FTP: 'pwd' } as const;

/** Run `fn`, counting the real path requests of `driver`'s client. */
async function countingRealpaths(driver: 'SFTP' | 'FTP', fn: () => Promise<unknown>): Promise<number> {
  const proto = realpathOf[driver];
  const original = proto[METHOD[driver]] as (...a: unknown[]) => unknown;
  let n = 0;
  proto[METHOD[driver]] = function (this: unknown, ...a: unknown[]) { n++; return original.apply(this, a); };
  try {
    await fn();
  } finally {
    proto[METHOD[driver]] = original;
  }
  return n;
}

let ts: TestServer;
let admin: string;
let remote: RemoteServers<'FTP' | 'SFTP'>;
let bRoot: string;

beforeAll(async () => {
  remote = await startRemoteServers(['FTP', 'SFTP'] as const);
  ts = await startRestServer();
  admin = await ts.login();
  bRoot = await addLocalStorage(ts, admin, '/b');
  ok(await createStorage(ts, admin, '/ftp', 'FTP', remote.additionOf('FTP')));
  ok(await createStorage(ts, admin, '/sftp', 'SFTP', remote.additionOf('SFTP')));
}, 60_000);

afterAll(async () => {
  await ts?.close();
  await remote?.stop();
  if (bRoot) await rm(bRoot, { recursive: true, force: true });
});

/** A tree under `top` with links to itself, to its parent, above it, and two folders linking to each other. */
async function loopyTree(top: string): Promise<void> {
  await mkdir(join(top, 'sub'), { recursive: true });
  await writeFile(join(top, 'f.txt'), 'once\n');
  await symlink('.', join(top, 'loop'));
  await symlink('..', join(top, 'up'));
  await symlink('../..', join(top, 'sub', 'up2'));
  for (const [from, to] of [['x', 'y'], ['y', 'x']]) {
    await mkdir(join(top, from));
    await writeFile(join(top, from, `${from}.txt`), from);
    await symlink(`../${to}`, join(top, from, 'l1'));
    await symlink(`../${to}`, join(top, from, 'l2'));
  }
}

const fsList = (path: string) => ts.api<{ content: Array<{ name: string; is_dir: boolean }> | null }>('/api/fs/list', { token: admin, body: { path, refresh: true } });

/** Copy `mount`/`name` to /b as a task; the number of tasks it made (stopped if it runs away). */
const copyTasks = (mount: string, name: string) => boundedCopy(ts, admin, mount, '/b', name);

const EXPECTED = ['f.txt', 'sub', 'x', 'x/l1', 'x/l1/y.txt', 'x/l2', 'x/l2/y.txt', 'x/x.txt', 'y', 'y/l1', 'y/l1/x.txt', 'y/l2', 'y/l2/x.txt', 'y/y.txt'];

describe.each([
  ['SFTP', '/sftp', () => remote.sshd.dataDir],
  ['FTP', '/ftp', () => remote.ftpd.dataDir],
] as const)('%s: links that loop back', (driver, mount, dataDir) => {
  const name = `loopy-${mount.slice(1)}`;

  it('a folder copy task from the storage copies the tree once, not following the loops into 2^depth tasks', async () => {
    await loopyTree(join(dataDir(), name));
    const total = await copyTasks(mount, name);
    // Was: over 100 tasks within seconds (loop and up followed at every level).
    const copied = (await readdir(join(bRoot, name), { recursive: true })).sort();
    expect(copied).toEqual(EXPECTED);
    expect(total).toBe(copied.length + 1); // a task per entry, and the folder's own
  }, 180_000);

  it('listings leave out the looping links, keep links elsewhere, and reached through a link the loop back is left out', async () => {
    const names = async (p: string) => {
      const r = await fsList(p);
      ok(r);
      return r.data!.content!.map((e) => `${e.name}${e.is_dir ? '/' : ''}`).sort();
    };
    expect(await names(`${mount}/${name}`)).toEqual(['f.txt', 'sub/', 'x/', 'y/']);
    expect(await names(`${mount}/${name}/sub`)).toEqual([]);
    expect(await names(`${mount}/${name}/x`)).toEqual(['l1/', 'l2/', 'x.txt']);
    // In x/l1 (really y), y's links lead back to x, a folder along the path.
    expect(await names(`${mount}/${name}/x/l1`)).toEqual(['y.txt']);
  });

  it('a listing without links to folders asks nothing more of the server; with one, a real path for the folder and one for the link', async () => {
    const dir = join(dataDir(), `plain-${mount.slice(1)}`);
    await mkdir(join(dir, 'sub'), { recursive: true });
    await writeFile(join(dir, 'a.txt'), 'a');
    await symlink('a.txt', join(dir, 'file-link'));
    const list = async () => ok(await fsList(`${mount}/plain-${mount.slice(1)}`));
    expect(await countingRealpaths(driver, list)).toBe(0);
    await symlink('sub', join(dir, 'dir-link'));
    // The count is seen at all (the patched method is the one the driver calls).
    expect(await countingRealpaths(driver, list)).toBe(2);
  });
});
