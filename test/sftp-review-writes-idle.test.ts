/**
 * Defects found by reading the SFTP adapter (protocols/sftp), each proven against the real server
 * with ssh2's client: overlapping out-of-order WRITEs, OPENDIRs answered after the connection
 * dropped, the idle timeout cutting off a request still being answered, fstatvfs on an upload.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { closeHandle as close, promised as p, withSsh2Sftp, writeAt as write } from './clients/sftp.js';

type Sftp = ssh2.SFTPWrapper;

let s: TestServer;
const storage = (...parts: string[]) => join(s.dataDir, 'storage', ...parts);
const asAdmin = () => ({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD });


beforeAll(async () => {
  s = await startTestServer();
});

afterAll(async () => {
  await s?.close();
});

describe('out-of-order WRITEs that overlap', () => {
  it('a later, shorter WRITE at the same offset keeps the rest of the earlier one (the file is not cut short)', async () => {
    await withSsh2Sftp(asAdmin(), async (sftp) => {
      const h = await p<Buffer>((cb) => sftp.open('/same-offset.bin', 'w', cb));
      await write(sftp, h, 100, 'a'.repeat(50));
      await write(sftp, h, 100, 'b'.repeat(10));
      await write(sftp, h, 0, 'c'.repeat(100));
      await close(sftp, h);
    });
    expect(await readFile(storage('same-offset.bin'), 'utf8')).toBe('c'.repeat(100) + 'b'.repeat(10) + 'a'.repeat(40));
  });

  it('the later of two overlapping held WRITEs wins, as pwrite(2)', async () => {
    await withSsh2Sftp(asAdmin(), async (sftp) => {
      const h = await p<Buffer>((cb) => sftp.open('/overlap.bin', 'w', cb));
      await write(sftp, h, 100, 'a'.repeat(50));
      await write(sftp, h, 120, 'b'.repeat(50));
      await write(sftp, h, 0, 'c'.repeat(100));
      await close(sftp, h);
    });
    expect(await readFile(storage('overlap.bin'), 'utf8')).toBe('c'.repeat(100) + 'a'.repeat(20) + 'b'.repeat(50));
  });
});

/** Sends `count` OPENDIRs of `path` and drops the connection at once, before any is answered. */
async function opendirsThenDrop(path: string, count: number): Promise<void> {
  const client = new ssh2.Client();
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
    client.connect({ host: '127.0.0.1', port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD, readyTimeout: 20_000 });
  });
  client.on('error', () => undefined);
  const sftp = await new Promise<Sftp>((res, rej) => client.sftp((e, x) => (e ? rej(e) : res(x))));
  sftp.on('error', () => undefined);
  for (let i = 0; i < count; i++) sftp.opendir(path, () => undefined);
  client.destroy();
}

/** Handles one user can hold now: channels opened one after another, each filled with OPENDIRs. */
async function handlesObtainable(): Promise<number> {
  return withSsh2Sftp(asAdmin(), async (_first, client) => {
    let total = 0;
    for (let c = 0; c < 5; c++) {
      const sftp = await new Promise<Sftp>((res, rej) => client.sftp((e, x) => (e ? rej(e) : res(x))));
      const got = await Promise.all(Array.from({ length: 256 }, () => new Promise<boolean>((res) => sftp.opendir('/', (e) => res(!e)))));
      total += got.filter(Boolean).length;
    }
    return total;
  });
}

describe('handles opened after the connection dropped', () => {
  it('an OPENDIR answered after the session ended does not stay counted against the user', async () => {
    // A fresh big folder each round: its listing is real I/O, still under way when the drop is seen.
    for (let round = 0; round < 4; round++) {
      await mkdir(storage(`big-${round}`));
      await Promise.all(Array.from({ length: 1500 }, (_, i) => writeFile(storage(`big-${round}`, `f${i}.txt`), 'x')));
      await opendirsThenDrop(`/big-${round}`, 256);
      await new Promise((r) => setTimeout(r, 300));
    }
    expect(await handlesObtainable()).toBe(1024);
  });
});

/**
 * A WebDAV server of one folder holding `slow.txt` that answers every PROPFIND after `delayMs`
 * once `slow` is set (a remote storage that takes its time).
 */
function slowDav(): { server: Server; port: () => number; slow: { on: boolean }; delayMs: number } {
  const slow = { on: false };
  const delayMs = 4000;
  const entry = (href: string, dir: boolean) =>
    `<d:response><d:href>${href}</d:href><d:propstat><d:prop>${dir ? '<d:resourcetype><d:collection/></d:resourcetype>' : '<d:resourcetype/><d:getcontentlength>4</d:getcontentlength>'}` +
    `<d:getlastmodified>Mon, 01 Jan 2024 00:00:00 GMT</d:getlastmodified></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>`;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const answer = () => {
        if (req.method !== 'PROPFIND') return void res.writeHead(405).end();
        const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
        const items = path === '/' ? [entry('/', true), ...(req.headers.depth === '1' ? [entry('/slow.txt', false)] : [])] : path === '/slow.txt' ? [entry('/slow.txt', false)] : [];
        if (!items.length) return void res.writeHead(404).end();
        res.writeHead(207, { 'content-type': 'application/xml' }).end(`<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">${items.join('')}</d:multistatus>`);
      };
      if (slow.on) setTimeout(answer, delayMs);
      else answer();
    });
  });
  return { server, port: () => (server.address() as AddressInfo).port, slow, delayMs };
}

describe('sftp.idle_timeout', () => {
  it('does not close a connection while a request is still being answered (a slow storage)', async () => {
    const dav = slowDav();
    await new Promise<void>((r) => dav.server.listen(0, '127.0.0.1', r));
    const data = await mkdtemp(join(tmpdir(), 'treegate-review-idle-'));
    await writeFile(join(data, 'config.json'), JSON.stringify({ sftp: { idle_timeout: 2 } }));
    const idle = await startTestServer({ dataDir: data });
    try {
      const admin = await idle.login();
      const created = await idle.api('/api/admin/storage/create', {
        token: admin,
        body: { mount_path: '/dav', driver: 'WebDav', cache_expiration: 0, addition: JSON.stringify({ address: `http://127.0.0.1:${dav.port()}`, username: 'u', password: 'p', root_folder_path: '/' }) },
      });
      expect(created.code).toBe(200);
      const got = await withSsh2Sftp({ port: idle.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, async (sftp) => {
        dav.slow.on = true;
        // Longer than the idle timeout: the client waits for its answer, it is not idle.
        return new Promise<string>((res) => sftp.stat('/dav/slow.txt', (e, st) => res(e ? `error: ${e.message}` : `size ${st.size}`)));
      });
      expect(got).toBe('size 4');
    } finally {
      await idle.close();
      await new Promise((r) => dav.server.close(r));
    }
  });
});

describe('fstatvfs@openssh.com', () => {
  it('answers for a handle of a file being uploaded (it does not exist until CLOSE)', async () => {
    const got = await withSsh2Sftp(asAdmin(), async (sftp) => {
      const h = await p<Buffer>((cb) => sftp.open('/fstatvfs-new.txt', 'w', cb));
      const st = await new Promise<string>((res) => sftp.ext_openssh_fstatvfs(h, (e, v) => res(e ? `error ${(e as Error & { code?: number }).code}` : `bsize ${v.f_bsize}`)));
      await write(sftp, h, 0, 'x');
      await close(sftp, h);
      return st;
    });
    expect(got).toBe('bsize 4096');
  });
});

