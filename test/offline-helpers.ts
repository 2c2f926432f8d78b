/** A loopback file server, free ports and a tiny .torrent writer for the offline download tests. */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { createServer as netServer } from 'node:net';

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
