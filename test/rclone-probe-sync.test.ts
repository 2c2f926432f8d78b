/**
 * What a NAS user's nightly `rclone sync` / `copy` / `check` meets, over the SFTP backend and the
 * WebDAV backend (vendor=other and vendor=owncloud): a second sync transfers nothing (mtimes and
 * sizes kept), check finds no differences (SFTP's md5sum/sha1sum exec probes are refused and rclone
 * falls back cleanly), deletions and renames, syncing back down, an upload killed mid-file, `about`,
 * a user with a base path and a read-only user.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, statfs, unlink, rename, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { requireTool, run } from './clients/webdav.js';
import { requireSftpTools, runSftp, uploadLeftovers, until } from './clients/sftp.js';
import { statvfsReply } from '../protocols/sftp/extended.js';

let ts: TestServer;
let work: string;
let token: string;
const env = { ...process.env, RCLONE_CONFIG: '/dev/null' };
const storage = () => join(ts.dataDir, 'storage');
/** Every local file gets an old, whole-second mtime (SFTP and WebDAV keep seconds). */
const OLD = new Date('2021-03-04T05:06:07Z');

const obscured = new Map<string, string>();
async function obscure(password: string): Promise<string> {
  if (!obscured.has(password)) obscured.set(password, (await run('rclone', ['obscure', password])).stdout.trim());
  return obscured.get(password)!;
}

async function sftpRemote(user = 'admin', password = ADMIN_PASSWORD): Promise<string[]> {
  return ['--sftp-host', '127.0.0.1', '--sftp-port', String(ts.sftpPort), '--sftp-user', user, '--sftp-pass', await obscure(password)];
}

async function davRemote(vendor: 'other' | 'owncloud', user = 'admin', password = ADMIN_PASSWORD): Promise<string[]> {
  return ['--webdav-url', `${ts.url}/dav`, '--webdav-vendor', vendor, '--webdav-user', user, '--webdav-pass', await obscure(password)];
}

/** One bounded rclone run (`--retries 1` so a failing run ends at once); `killed` when the bound stopped it. */
function rclone(args: string[], timeoutMs = 30_000) {
  return new Promise<{ code: number; killed: boolean; stdout: string; stderr: string }>((resolve) => {
    execFile('rclone', [...args, '--retries', '1', '--low-level-retries', '2', '-v', '--stats', '0'], { env, timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, killed: err?.killed === true, stdout, stderr }),
    );
  });
}

/** The files rclone logged as transferred ("Copied (new)", "Copied (replaced existing)"). */
const copied = (log: string) => log.split('\n').filter((l) => /: Copied \(/.test(l));

/** 30 files in nested folders: some empty, names with spaces and non-ASCII letters. */
async function makeTree(dir: string): Promise<string[]> {
  const files: string[] = [];
  for (let i = 1; i <= 30; i++) {
    const sub = ['', 'a', join('a', 'b', 'c'), join('dir with space', 'ü ñ')][i % 4]!;
    await mkdir(join(dir, sub), { recursive: true });
    const name = i % 7 === 0 ? `empty ${i}.txt` : `file-${i} ñé.bin`;
    const p = join(dir, sub, name);
    await writeFile(p, i % 7 === 0 ? Buffer.alloc(0) : Buffer.alloc(i * 1000 + 7, i));
    await utimes(p, OLD, OLD);
    files.push(join(sub, name));
  }
  return files;
}

async function listFiles(dir: string): Promise<Record<string, { size: number; mtime: number }>> {
  const out: Record<string, { size: number; mtime: number }> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const s = await stat(join(e.parentPath, e.name));
    out[relative(dir, join(e.parentPath, e.name))] = { size: s.size, mtime: Math.floor(s.mtimeMs / 1000) };
  }
  return out;
}

beforeAll(async () => {
  requireTool('rclone', 'rclone');
  requireSftpTools();
  ts = await startTestServer();
  work = await mkdtemp(join(tmpdir(), 'tg-rclone-sync-'));
  token = await ts.login();
  const perm = (bits: number[]) => bits.reduce((n, b) => n | (1 << b), 0);
  await mkdir(join(storage(), 'home', 'bob'), { recursive: true });
  await mkdir(join(storage(), 'ro'), { recursive: true });
  for (const body of [
    // write, rename, move, copy, remove, WebDAV read+manage, SFTP read+manage
    { username: 'bob', password: 'bob-pass-1', base_path: '/home/bob', role: 0, permission: perm([3, 4, 5, 6, 7, 8, 9, 10, 11]), disabled: false },
    // WebDAV and SFTP read only
    { username: 'reader', password: 'reader-pass-1', base_path: '/ro', role: 0, permission: perm([8, 10]), disabled: false },
  ]) {
    expect(await ts.api('/api/admin/user/create', { token, body })).toMatchObject({ code: 200 });
  }
});

afterAll(async () => {
  await ts?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('rclone over SFTP', () => {
  it('sync keeps mtimes and sizes: the second sync transfers nothing, check (and --download) finds no difference', async () => {
    const src = join(work, 'sftp-src');
    const files = await makeTree(src);
    const remote = await sftpRemote();
    const first = await rclone(['sync', src, ':sftp:/nightly', ...remote]);
    expect(first.code, first.stderr).toBe(0);
    expect(copied(first.stderr)).toHaveLength(30);
    // SETSTAT after each upload kept the source's mtime; sizes are right (empty files included).
    expect(await listFiles(join(storage(), 'nightly'))).toEqual(await listFiles(src));

    const second = await rclone(['sync', src, ':sftp:/nightly', ...remote]);
    expect(second.code, second.stderr).toBe(0);
    expect(copied(second.stderr)).toEqual([]);
    expect(second.stderr).toContain('There was nothing to transfer');

    // rclone probes md5sum/sha1sum with exec requests: refused, it falls back to size + mtime.
    const check = await rclone(['check', src, ':sftp:/nightly', ...remote]);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stderr).toContain('0 differences found');
    expect(check.stderr).toContain(`${files.length} matching files`);
    const download = await rclone(['check', '--download', src, ':sftp:/nightly', ...remote]);
    expect(download.code, download.stderr).toBe(0);
    expect(download.stderr).toContain('0 differences found');

    const ls = await rclone(['lsjson', ':sftp:/nightly/a', ...remote]);
    expect(ls.code, ls.stderr).toBe(0);
    const entries = JSON.parse(ls.stdout) as Array<{ Name: string; ModTime: string; IsDir: boolean }>;
    for (const e of entries.filter((x) => !x.IsDir)) expect(new Date(e.ModTime).getTime(), e.Name).toBe(OLD.getTime());
  }, 60_000);

  it('sync deletes what was removed locally, --track-renames moves server-side, and sync back down keeps mtimes', async () => {
    const src = join(work, 'sftp-src');
    const remote = await sftpRemote();
    await unlink(join(src, 'a', 'file-1 ñé.bin'));
    await rename(join(src, 'a', 'file-5 ñé.bin'), join(src, 'a', 'b', 'renamed 5.bin'));
    const sync = await rclone(['sync', src, ':sftp:/nightly', '--track-renames', '--track-renames-strategy', 'modtime', ...remote]);
    expect(sync.code, sync.stderr).toBe(0);
    expect(sync.stderr).toMatch(/renamed 5\.bin: Renamed from "a\/file-5 ñé\.bin"/);
    expect(sync.stderr).toMatch(/file-1 ñé\.bin: Deleted/);
    expect(copied(sync.stderr)).toEqual([]);
    expect(await listFiles(join(storage(), 'nightly'))).toEqual(await listFiles(src));

    const down = join(work, 'sftp-down');
    const get = await rclone(['sync', ':sftp:/nightly', down, ...remote]);
    expect(get.code, get.stderr).toBe(0);
    expect(await listFiles(down)).toEqual(await listFiles(src));
    const again = await rclone(['sync', ':sftp:/nightly', down, ...remote]);
    expect(copied(again.stderr)).toEqual([]);
  }, 60_000);

  it('about and sftp df give the disk\'s own figures: blocks reserved for root are neither "used" nor "available"', async () => {
    // What OpenSSH's sftp-server sends for this disk: statvfs as is (bfree and bavail apart).
    const fs = await statfs(storage());
    const slack = 1 << 30; // other writers on this disk meanwhile
    const about = await rclone(['about', '--json', ':sftp:/', ...(await sftpRemote())]);
    expect(about.code, about.stderr).toBe(0);
    const r = JSON.parse(about.stdout) as { total: number; used: number; free: number };
    expect(Math.abs(r.total - fs.blocks * fs.bsize)).toBeLessThanOrEqual(1 << 12);
    // rclone's sftp backend takes used = total - bfree (and shows bfree as free).
    expect(Math.abs(r.used - (fs.blocks - fs.bfree) * fs.bsize)).toBeLessThanOrEqual(slack);
    expect(Math.abs(r.free - fs.bfree * fs.bsize)).toBeLessThanOrEqual(slack);

    // OpenSSH's `df` (KiB): Used = blocks - bfree, Avail = bavail, as df(1) on the host.
    const df = await runSftp({ port: ts.sftpPort, user: 'admin', password: ADMIN_PASSWORD }, ['df']);
    expect(df.code, df.stderr).toBe(0);
    const [size, used, avail] = df.stdout.split('\n').find((l) => /^\s*\d+\s+\d+\s+\d+/.test(l))!.trim().split(/\s+/).map(Number);
    expect(Math.abs(size! * 1024 - fs.blocks * fs.bsize)).toBeLessThanOrEqual(1 << 12);
    expect(Math.abs(used! * 1024 - (fs.blocks - fs.bfree) * fs.bsize)).toBeLessThanOrEqual(slack);
    expect(Math.abs(avail! * 1024 - fs.bavail * fs.bsize)).toBeLessThanOrEqual(slack);
  });

  it('statvfs keeps bfree (total - used) and bavail (free) apart, whatever disk the test runs on', () => {
    const B = 4096;
    const body = Buffer.concat(statvfsReply({ total: 1000 * B, used: 300 * B, free: 650 * B }));
    const field = (i: number) => Number(body.readBigUInt64BE(i * 8));
    expect([field(2), field(3), field(4)]).toEqual([1000, 700, 650]); // blocks, bfree, bavail
    // Only a free figure known: both are it.
    const onlyFree = Buffer.concat(statvfsReply({ total: 1000 * B, free: 650 * B }));
    expect([onlyFree.readBigUInt64BE(24), onlyFree.readBigUInt64BE(32)]).toEqual([650n, 650n]);
  });

  it('a copy killed mid-file leaves the old file whole and nothing under a new name; the rerun lands it whole', async () => {
    const dir = join(work, 'big');
    await mkdir(dir, { recursive: true });
    const big = Buffer.alloc(50 << 20);
    for (let i = 0; i < big.length; i += 4) big.writeUInt32LE((i * 2654435761) >>> 0, i);
    await writeFile(join(dir, 'big.bin'), big);
    await mkdir(join(storage(), 'big-old'), { recursive: true });
    await writeFile(join(storage(), 'big-old', 'big.bin'), 'the old version');
    const remote = await sftpRemote();
    for (const target of ['big-old', 'big-new']) {
      const child = spawn('rclone', ['copy', dir, `:sftp:/${target}`, ...remote, '--bwlimit', '16M', '--retries', '1'], { env, stdio: 'ignore' });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      // Killed once a part of the file reached the server's temp file, never at a guessed moment.
      const started = await until(async () => {
        const temps = (await readdir(join(storage(), target)).catch(() => [] as string[])).filter((n) => n.startsWith('.treegate-upload-'));
        for (const t of temps) if (((await stat(join(storage(), target, t)).catch(() => undefined))?.size ?? 0) > 4 << 20) return true;
        return false;
      }, 20_000);
      child.kill('SIGKILL');
      await exited;
      expect(started).toBe(true);
      expect(await until(async () => (await uploadLeftovers(ts.dataDir)).length === 0, 15_000)).toBe(true);
    }
    expect(await readFile(join(storage(), 'big-old', 'big.bin'), 'utf8')).toBe('the old version');
    expect(await readdir(join(storage(), 'big-new'))).toEqual([]);

    for (const target of ['big-old', 'big-new']) {
      const again = await rclone(['copy', dir, `:sftp:/${target}`, ...remote], 60_000);
      expect(again.code, again.stderr).toBe(0);
      expect((await readFile(join(storage(), target, 'big.bin'))).equals(big)).toBe(true);
    }
  }, 90_000);

  it('a user with a base path syncs into it; a read-only user gets "permission denied" at once, nothing written', async () => {
    const src = join(work, 'sftp-src');
    const bob = await sftpRemote('bob', 'bob-pass-1');
    const up = await rclone(['sync', src, ':sftp:/tree', ...bob]);
    expect(up.code, up.stderr).toBe(0);
    expect(await listFiles(join(storage(), 'home', 'bob', 'tree'))).toEqual(await listFiles(src));
    const again = await rclone(['sync', src, ':sftp:/tree', ...bob]);
    expect(copied(again.stderr)).toEqual([]);

    const reader = await sftpRemote('reader', 'reader-pass-1');
    const denied = await rclone(['sync', src, ':sftp:/tree', ...reader]);
    expect(denied.killed).toBe(false); // ended by itself, not by the time bound
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/permission denied/i);
    expect(await readdir(join(storage(), 'ro'))).toEqual([]);
    // Reading is allowed: check of an empty remote reports the missing files, without hanging.
    const check = await rclone(['check', src, ':sftp:/', ...reader]);
    expect(check.code).toBe(1);
    expect(check.stderr).toMatch(/files missing/);
  }, 60_000);
});

describe('rclone over WebDAV', () => {
  it('vendor=owncloud keeps mtimes with X-OC-Mtime: the second sync transfers nothing and check finds no difference', async () => {
    const src = join(work, 'dav-src');
    await makeTree(src);
    const remote = await davRemote('owncloud');
    const first = await rclone(['sync', src, ':webdav:oc', ...remote]);
    expect(first.code, first.stderr).toBe(0);
    expect(copied(first.stderr)).toHaveLength(30);
    expect(await listFiles(join(storage(), 'oc'))).toEqual(await listFiles(src));
    const second = await rclone(['sync', src, ':webdav:oc', ...remote]);
    expect(second.code, second.stderr).toBe(0);
    expect(copied(second.stderr)).toEqual([]);
    const check = await rclone(['check', src, ':webdav:oc', ...remote]);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stderr).toContain('0 differences found');
  }, 60_000);

  it('vendor=other cannot set mtimes: rclone compares sizes only and the second sync transfers nothing', async () => {
    const src = join(work, 'dav-src');
    const remote = await davRemote('other');
    const first = await rclone(['sync', src, ':webdav:plain', ...remote]);
    expect(first.code, first.stderr).toBe(0);
    expect(copied(first.stderr)).toHaveLength(30);
    const second = await rclone(['sync', src, ':webdav:plain', ...remote]);
    expect(second.code, second.stderr).toBe(0);
    expect(copied(second.stderr)).toEqual([]);
    const about = await rclone(['about', '--json', ':webdav:', ...remote]);
    expect(about.code, about.stderr).toBe(0);
    expect((JSON.parse(about.stdout) as { free: number }).free).toBeGreaterThan(0);
  }, 60_000);
});
