/**
 * The Local driver under failure (a read-only disk, a looping link, EPERM, a FIFO, a listing racing
 * an old-dated upload), proved over the real server.
 */
import { mkdirSync, readdirSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { mountTmpfs } from './small-disk.js';
import { tempFolders } from './temp-folders.js';

let ts: TestServer;
let admin: string;
const temp = tempFolders();
const unmounts: Array<() => void> = [];
const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
let root: string;

const post = <T = unknown>(path: string, body: unknown = {}) => ts.api<T>(path, { token: admin, body });

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  root = temp.make('tg-lfr-');
  mkdirSync(join(root, 'ro'));
  unmounts.push(mountTmpfs(join(root, 'ro'), '1m'));
  writeFileSync(join(root, 'ro', 'kept.txt'), 'kept');
  const r = spawnSync('mount', ['-o', 'remount,ro', join(root, 'ro')], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`remount ro failed: ${r.stderr}`);
  ok(await post('/api/admin/storage/create', { mount_path: '/l', driver: 'Local', addition: JSON.stringify({ root_folder_path: root }) }));
});

afterAll(async () => {
  for (const u of unmounts) u();
  await ts?.close();
  temp.removeAll();
});

/** One request on `agent` (one kept-alive connection); resolves with the status and body text. */
function send(agent: Agent, method: string, path: string, headers: Record<string, string>, body?: Buffer): Promise<{ status: number; text: string }> {
  const u = new URL(ts.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, method, path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('an upload refused by a read-only disk before its body was read', () => {
  // More than the 64 KiB a small upload is taken whole: the driver fails before reading the body.
  const body = Buffer.alloc(200_000, 1);

  it.each([
    ['REST', 'PUT', '/api/fs/put', () => ({ authorization: admin, 'file-path': encodeURIComponent('/l/ro/new.bin') })],
    ['WebDAV', 'PUT', '/dav/l/ro/new.bin', () => ({ authorization: basic })],
  ])('%s: the connection still answers the next request', async (_p, method, path, headers) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const r = await send(agent, method, path, { ...headers(), 'content-type': 'application/octet-stream', 'content-length': String(body.length) }, body);
      expect(r.status === 403 || r.text.includes('"code":403'), r.text).toBe(true);
      // The same connection: it was left paused with the body unread, and hung until it was reset.
      const next = await send(agent, 'POST', '/api/fs/list', { authorization: admin, 'content-type': 'application/json' }, Buffer.from(JSON.stringify({ path: '/l/ro' })));
      expect(next.status).toBe(200);
      expect(next.text).toContain('kept.txt');
      expect(readdirSync(join(root, 'ro'))).toEqual(['kept.txt']);
    } finally {
      agent.destroy();
    }
  });
});

describe('a path through a link that loops (ELOOP)', () => {
  beforeAll(() => symlinkSync('loop', join(root, 'loop')));

  it('REST mkdir and upload under it answer not found, as its listing does, not a backend failure', async () => {
    expect(await post('/api/fs/list', { path: '/l/loop' })).toMatchObject({ message: 'object not found' });
    expect(await post('/api/fs/mkdir', { path: '/l/loop/sub' })).toMatchObject({ message: 'object not found' });
    const r = await fetch(ts.url + '/api/fs/put', { method: 'PUT', headers: { authorization: admin, 'file-path': encodeURIComponent('/l/loop/f.txt') }, body: 'x' });
    expect(await r.json()).toMatchObject({ message: 'object not found' });
    expect(ts.logs.filter((l) => l.includes('ELOOP') && l.includes('"level":50'))).toEqual([]);
  });

});

describe('a delete the file system refuses (EPERM: an immutable file)', () => {
  let im: string;
  const chattr = (flag: '+i' | '-i', ...paths: string[]) => {
    const r = spawnSync('chattr', [flag, ...paths], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`chattr ${flag} failed: ${r.stderr}`);
  };
  beforeAll(() => {
    // A tmpfs of its own: it takes the immutable flag (Linux 6.0+), and root cannot remove such a file.
    im = join(root, 'im');
    mkdirSync(im);
    unmounts.unshift(mountTmpfs(im, '1m'));
    writeFileSync(join(im, 'f.txt'), 'keep');
    mkdirSync(join(im, 'd'));
    writeFileSync(join(im, 'd', 'g.txt'), 'keep');
    chattr('+i', join(im, 'f.txt'), join(im, 'd', 'g.txt'));
    unmounts.unshift(() => chattr('-i', join(im, 'f.txt'), join(im, 'd', 'g.txt')));
  });

  it('REST remove answers permission denied, not "not a folder"', async () => {
    expect(await post('/api/fs/remove', { dir: '/l/im', names: ['f.txt'] })).toMatchObject({ code: 403, message: 'permission denied' });
    expect(await post('/api/fs/remove', { dir: '/l/im', names: ['d'] })).toMatchObject({ code: 403, message: 'permission denied' });
    expect(readdirSync(im).sort()).toEqual(['d', 'f.txt']);
  });

  it('WebDAV DELETE answers 403, not 409 Conflict', async () => {
    const r = await fetch(ts.url + '/dav/l/im/f.txt', { method: 'DELETE', headers: { authorization: basic } });
    expect(r.status).toBe(403);
  });
});

describe('a folder holding a FIFO (not served, never listed)', () => {
  beforeAll(() => {
    mkdirSync(join(root, 'other'));
    unmounts.unshift(mountTmpfs(join(root, 'other'), '1m'));
  });
  const withFifo = (name: string) => {
    mkdirSync(join(root, name));
    writeFileSync(join(root, name, 'x.txt'), 'x');
    const r = spawnSync('mkfifo', [join(root, name, 'p')]);
    if (r.status !== 0) throw new Error('mkfifo failed');
  };

  it('is copied with what it lists, not refused as a backend failure', async () => {
    withFifo('pf1');
    ok(await post('/api/fs/copy', { src_dir: '/l', dst_dir: '/l/other', names: ['pf1'] }));
    expect(readdirSync(join(root, 'other', 'pf1'))).toEqual(['x.txt']);
  });

  it('is moved to another file system', async () => {
    withFifo('pf2');
    ok(await post('/api/fs/move', { src_dir: '/l', dst_dir: '/l/other', names: ['pf2'] }));
    expect(readdirSync(join(root, 'other', 'pf2'))).toEqual(['x.txt']);
    expect(readdirSync(root)).not.toContain('pf2');
  });
});

describe('a listing running while old files are written (it sweeps temp files older than an hour)', () => {
  /** Run `work` while the folder `dir` is listed (fresh from disk) over and over. */
  async function whileListed<T>(dir: string, work: () => Promise<T>): Promise<T> {
    let stop = false;
    const lister = (async () => {
      while (!stop) await post('/api/fs/list', { path: dir, refresh: true });
    })();
    try {
      return await work();
    } finally {
      stop = true;
      await lister;
    }
  }

  it('uploads with an old Last-Modified all land (the temp file got its old time before it was placed)', async () => {
    mkdirSync(join(root, 'up'));
    const body = Buffer.alloc(70_000, 1); // streamed: more than the 64 KiB written in one go
    const failed = await whileListed('/l/up', async () => {
      const out: string[] = [];
      await Promise.all([0, 1, 2, 3].map(async (w) => {
        for (let i = 0; i < 60; i++) {
          const r = await fetch(ts.url + '/api/fs/put', {
            method: 'PUT',
            headers: { authorization: admin, 'file-path': encodeURIComponent(`/l/up/f${w}-${i}`), 'last-modified': '1000000000000' },
            body,
          });
          const env = (await r.json()) as { code: number; message: string };
          if (env.code !== 200) out.push(env.message);
        }
      }));
      return out;
    });
    expect(failed).toEqual([]);
    expect(readdirSync(join(root, 'up')).length).toBe(240);
  });

  it('copies of an old file all land', async () => {
    mkdirSync(join(root, 'cpsrc'));
    mkdirSync(join(root, 'cpdst'));
    for (let i = 0; i < 240; i++) {
      writeFileSync(join(root, 'cpsrc', `f${i}`), 'x');
      utimesSync(join(root, 'cpsrc', `f${i}`), new Date(1e12), new Date(1e12));
    }
    const failed = await whileListed('/l/cpdst', async () => {
      const out: string[] = [];
      await Promise.all([0, 1, 2, 3].map(async (w) => {
        for (let i = w; i < 240; i += 4) {
          const env = await post('/api/fs/copy', { src_dir: '/l/cpsrc', dst_dir: '/l/cpdst', names: [`f${i}`] });
          if (env.code !== 200) out.push(env.message);
        }
      }));
      return out;
    });
    expect(failed).toEqual([]);
    expect(readdirSync(join(root, 'cpdst')).length).toBe(240);
  });
});
