/** A loopback file server, free ports, a tiny .torrent writer and qbittorrent-nox for the offline download tests. */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { createServer as netServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { until } from './tasks-helpers.js';

export interface FileServer {
  url: string;
  server: Server;
  hits: string[];
  close(): Promise<void>;
}

/**
 * Serves `files` (path → bytes) with Range support, plus: /redir/<path> (302 to /<path>),
 * /cd (Content-Disposition naming `../../evil.txt`), /endless (never ends, no length),
 * /e404 (HTTP 404).
 */
export async function startFileServer(files: Record<string, Buffer>): Promise<FileServer> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    const path = decodeURIComponent((req.url ?? '/').split('?')[0]!);
    hits.push(path);
    if (path.startsWith('/redir/')) return res.writeHead(302, { location: path.slice('/redir'.length) }).end();
    if (path === '/e404') return res.writeHead(404).end('no');
    if (path === '/cd') return res.writeHead(200, { 'content-disposition': 'attachment; filename="../../evil.txt"', 'content-length': 4 }).end('evil');
    if (path === '/endless') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const chunk = Buffer.alloc(16 * 1024, 7);
      const timer = setInterval(() => res.write(chunk), 5);
      res.on('close', () => clearInterval(timer));
      return;
    }
    const body = files[path];
    if (!body) return res.writeHead(404).end();
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (range) {
      const start = Number(range[1]);
      const end = range[2] ? Math.min(Number(range[2]), body.length - 1) : body.length - 1;
      res.writeHead(206, { 'content-length': end - start + 1, 'content-range': `bytes ${start}-${end}/${body.length}`, 'accept-ranges': 'bytes' });
      return res.end(body.subarray(start, end + 1));
    }
    res.writeHead(200, { 'content-length': body.length, 'accept-ranges': 'bytes' }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`, server, hits,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

export async function freePort(): Promise<number> {
  const s = netServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

type Bencodable = number | string | Buffer | Bencodable[] | { [k: string]: Bencodable };

export function bencode(v: Bencodable): Buffer {
  if (typeof v === 'number') return Buffer.from(`i${v}e`);
  if (typeof v === 'string') v = Buffer.from(v);
  if (Buffer.isBuffer(v)) return Buffer.concat([Buffer.from(`${v.length}:`), v]);
  if (Array.isArray(v)) return Buffer.concat([Buffer.from('l'), ...v.map(bencode), Buffer.from('e')]);
  const keys = Object.keys(v).sort();
  return Buffer.concat([Buffer.from('d'), ...keys.flatMap((k) => [bencode(k), bencode(v[k]!)]), Buffer.from('e')]);
}

/** A single-file torrent with no tracker whose only source is an HTTP web seed (BEP 19). */
export function webSeedTorrent(name: string, data: Buffer, webSeed: string): Buffer {
  const pieceLength = 16 * 1024;
  const pieces: Buffer[] = [];
  for (let i = 0; i < data.length; i += pieceLength) pieces.push(createHash('sha1').update(data.subarray(i, i + pieceLength)).digest());
  return bencode({ info: { length: data.length, name, 'piece length': pieceLength, pieces: Buffer.concat(pieces) }, 'url-list': webSeed });
}

/** An entry of a multi-file torrent: a file with its bytes, or a BEP 47 symbolic link (`symlink`, relative to the torrent's folder). */
export interface TorrentEntry {
  path: string[];
  data?: Buffer;
  symlink?: string[];
}

/**
 * A multi-file torrent with no tracker whose only source is an HTTP web seed (BEP 19): its files
 * are fetched from `webSeed` + `name/` + their path. Links have no bytes; empty files need no source.
 */
export function multiFileTorrent(name: string, entries: TorrentEntry[], webSeed: string): Buffer {
  const pieceLength = 16 * 1024;
  const all = Buffer.concat(entries.map((e) => (e.symlink ? Buffer.alloc(0) : e.data ?? Buffer.alloc(0))));
  const pieces: Buffer[] = [];
  for (let i = 0; i < all.length; i += pieceLength) pieces.push(createHash('sha1').update(all.subarray(i, i + pieceLength)).digest());
  const files = entries.map((e): Bencodable => (e.symlink
    ? { length: 0, path: e.path, attr: 'l', 'symlink path': e.symlink }
    : { length: e.data?.length ?? 0, path: e.path }));
  return bencode({ info: { files, name, 'piece length': pieceLength, pieces: Buffer.concat(pieces) }, 'url-list': webSeed });
}

export interface Qbittorrent {
  port: number;
  /** The torrents qBittorrent lists under a task's tag. */
  tagged(taskId: string): Promise<Array<{ save_path: string }>>;
  stop(): Promise<void>;
}

/** A real qbittorrent-nox on loopback with a fresh profile (WebUI login admin/adminadmin). */
export async function startQbittorrent(): Promise<Qbittorrent> {
  const profile = await mkdtemp(join(tmpdir(), 'treegate-qbt-'));
  // qBittorrent 4.5 has no --confirm-legal-notice: accept it in the profile's config instead.
  await mkdir(join(profile, 'qBittorrent', 'config'), { recursive: true });
  await writeFile(join(profile, 'qBittorrent', 'config', 'qBittorrent.conf'), '[LegalNotice]\nAccepted=true\n');
  const port = await freePort();
  const qbit = spawn('qbittorrent-nox', [`--profile=${profile}`, `--webui-port=${port}`], { stdio: 'ignore' });
  qbit.once('error', (e) => { throw new Error(`qbittorrent-nox missing (apt-get install -y qbittorrent-nox): ${e.message}`); });
  await until('qBittorrent WebUI', async () => (await fetch(`http://127.0.0.1:${port}/`).then(() => true, () => undefined)), 20_000);
  const base = `http://127.0.0.1:${port}/api/v2`;
  return {
    port,
    tagged: async (taskId) => {
      const login = await fetch(`${base}/auth/login`, { method: 'POST', body: new URLSearchParams({ username: 'admin', password: 'adminadmin' }) });
      const sid = /SID=[^;]+/.exec(login.headers.get('set-cookie') ?? '')![0];
      return (await (await fetch(`${base}/torrents/info?tag=treegate-${taskId}`, { headers: { cookie: sid } })).json()) as Array<{ save_path: string }>;
    },
    stop: async () => {
      qbit.kill('SIGKILL');
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** qBittorrent's WebUI API, logged in as its admin (what a user does in qBittorrent's own UI). */
export async function qbApi(port: number) {
  const base = `http://127.0.0.1:${port}/api/v2`;
  const login = await fetch(`${base}/auth/login`, { method: 'POST', body: new URLSearchParams({ username: 'admin', password: 'adminadmin' }) });
  const cookie = /SID=[^;]+/.exec(login.headers.get('set-cookie') ?? '')![0];
  return {
    get: async <T>(path: string) => (await (await fetch(base + path, { headers: { cookie } })).json()) as T,
    post: async (path: string, body: Record<string, string>) => {
      const res = await fetch(base + path, { method: 'POST', headers: { cookie }, body: new URLSearchParams(body) });
      expect(res.status, await res.text()).toBe(200);
    },
  };
}
