/**
 * Code-review probe of the S3 driver under failure, through the whole server: s3rver on loopback
 * behind a small HTTP proxy that can answer a chosen request with an error or drop its answer.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';

let ts: TestServer;
let admin: string;
let remote: RemoteServers<'S3'>;

/** Decides one request: true when it answered (or dropped) it itself, false to pass it on. */
type Rule = (req: IncomingMessage, res: ServerResponse) => boolean;
let rule: Rule = () => false;
let proxy: Server;
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

beforeAll(async () => {
  remote = await startRemoteServers(['S3'] as const);
  ts = await startRestServer();
  admin = await ts.login();
  proxy = createServer((req, res) => {
    if (rule(req, res)) return;
    const up = request({ host: '127.0.0.1', port: remote.s3.port, method: req.method, path: req.url, headers: req.headers }, (r) => { res.writeHead(r.statusCode!, r.headers); r.pipe(res); });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  ok(await createStorage(ts, admin, '/s3', 'S3', remote.additionOf('S3', (proxy.address() as { port: number }).port)));
}, 60_000);

afterAll(async () => {
  proxy?.closeAllConnections();
  await new Promise((r) => proxy?.close(r));
  await ts?.close();
  await remote?.stop();
});

const xmlError = (code: string) => `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code}</Message></Error>`;

async function putRaw(path: string, body: Buffer): Promise<{ code: number; message: string }> {
  const res = await fetch(ts.url + '/api/fs/put', {
    method: 'PUT',
    headers: { authorization: admin, 'file-path': encodeURIComponent(path), 'content-type': 'application/octet-stream' },
    body,
  });
  return (await res.json()) as { code: number; message: string };
}

/** S3's answer to AbortMultipartUpload (s3rver 3.7 does not implement it: 405), noted in `abortedUploads`. */
const abortedUploads: string[] = [];
const answerAbort: Rule = (req, res) => {
  if (req.method !== 'DELETE' || !/[?&]uploadId=/.test(req.url!)) return false;
  abortedUploads.push(req.url!);
  res.writeHead(204).end();
  return true;
};

describe('S3: a multipart upload whose part S3 refuses', () => {
  it('answers with S3\'s own error (AccessDenied: 403), not "operation aborted"; the upload is aborted and nothing is left', async () => {
    abortedUploads.length = 0;
    rule = (req, res) => {
      if (req.method === 'PUT' && /[?&]partNumber=2(&|$)/.test(req.url!)) {
        req.resume();
        res.writeHead(403, { 'content-type': 'application/xml' }).end(xmlError('AccessDenied'));
        return true;
      }
      return answerAbort(req, res);
    };
    try {
      const r = await putRaw('/s3/part/big.bin', randomBytes(40 << 20)); // eight parts of 5 MiB, three in flight
      expect([r.code, r.message]).toEqual([403, expect.stringMatching(/AccessDenied/)]);
      expect(abortedUploads).toHaveLength(1);
      const got = await ts.api('/api/fs/get', { token: admin, body: { path: '/s3/part/big.bin' } });
      expect(got.code).not.toBe(200);
    } finally {
      rule = () => false;
    }
  }, 60_000);
});

describe('S3: a server error answered to a HEAD (no body, so no error code)', () => {
  it('names the HTTP status (503), not "S3 error: Unknown"', async () => {
    ok(await putRaw('/s3/busy/a.txt', Buffer.from('x')));
    rule = (req, res) => {
      req.resume();
      res.writeHead(503, { 'content-type': 'application/xml' }).end(xmlError('SlowDown'));
      return true;
    };
    try {
      const r = await ts.api('/api/fs/get', { token: admin, body: { path: '/s3/busy/a.txt' } });
      expect([r.code, r.message]).toEqual([500, expect.stringMatching(/503/)]);
    } finally {
      rule = () => false;
    }
  }, 60_000);
});

describe('S3: an endpoint that drops the connection (a proxy or load balancer resetting it)', () => {
  it('says the connection was reset (ECONNRESET), not that the endpoint timed out', async () => {
    ok(await putRaw('/s3/reset/a.txt', Buffer.from('x')));
    rule = (req) => {
      req.socket.destroy();
      return true;
    };
    try {
      const r = await ts.api('/api/fs/get', { token: admin, body: { path: '/s3/reset/a.txt' } });
      expect(r.code).toBe(500);
      expect(r.message).toMatch(/ECONNRESET/);
      expect(r.message).not.toMatch(/timed out/);
    } finally {
      rule = () => false;
    }
  }, 60_000);
});

/** Pass a request on to s3rver; `answer` gets its answer (status, headers, body) to send as it likes. */
function forward(req: IncomingMessage, answer: (status: number, headers: IncomingHttpHeaders, body: Buffer) => void): void {
  const up = request({ host: '127.0.0.1', port: remote.s3.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
    const chunks: Buffer[] = [];
    r.on('data', (c: Buffer) => chunks.push(c));
    r.on('end', () => answer(r.statusCode!, r.headers, Buffer.concat(chunks)));
  });
  req.pipe(up);
}

describe('S3: a multipart upload whose Complete answer is lost', () => {
  it('is a success when the object is there with exactly the uploaded parts (the SDK\'s retry got NoSuchUpload)', async () => {
    // As MinIO or Ceph: the first Complete stores the object but its answer is lost on the way; the
    // SDK retries it and the upload, now complete, is unknown (NoSuchUpload). The object's ETag is
    // S3's multipart one: MD5 of the parts' MD5s, "-", their count (s3rver's is the MD5 of the whole).
    const partTags = new Map<number, string>();
    let completes = 0;
    rule = (req, res) => {
      const part = /[?&]partNumber=(\d+)/.exec(req.url!);
      if (req.method === 'PUT' && part) {
        forward(req, (status, headers, body) => {
          partTags.set(Number(part[1]), String(headers.etag).replace(/"/g, ''));
          res.writeHead(status, headers).end(body);
        });
        return true;
      }
      if ((req.method === 'POST' || req.method === 'DELETE') && /[?&]uploadId=/.test(req.url!)) {
        if (completes++) {
          req.resume();
          res.writeHead(404, { 'content-type': 'application/xml' }).end(xmlError('NoSuchUpload'));
        } else {
          forward(req, () => res.socket?.destroy());
        }
        return true;
      }
      if (req.method === 'HEAD' && req.url!.startsWith('/bucket/lost/c.bin')) {
        forward(req, (status, headers) => {
          const md5 = createHash('md5');
          for (const n of [...partTags.keys()].sort((a, b) => a - b)) md5.update(Buffer.from(partTags.get(n)!, 'hex'));
          if (status === 200) headers.etag = `"${md5.digest('hex')}-${partTags.size}"`;
          res.writeHead(status, headers).end();
        });
        return true;
      }
      return false;
    };
    try {
      const body = randomBytes(12 << 20); // three parts
      const r = await putRaw('/s3/lost/c.bin', body);
      expect(completes).toBeGreaterThan(1);
      expect([r.code, r.message]).toEqual([200, 'success']);
      rule = () => false;
      const got = await ts.api<{ size: number }>('/api/fs/get', { token: admin, body: { path: '/s3/lost/c.bin' } });
      expect(got.data?.size).toBe(body.length);
    } finally {
      rule = () => false;
    }
  }, 60_000);
});

describe('S3: a multipart upload S3 no longer knows (aborted meanwhile: a lifecycle rule, another client)', () => {
  it('fails as the backend\'s error naming NoSuchUpload, not "object not found" (WebDAV: 502, not 404)', async () => {
    rule = (req, res) => {
      if (req.method === 'PUT' && /[?&]partNumber=2(&|$)/.test(req.url!)) {
        req.resume();
        res.writeHead(404, { 'content-type': 'application/xml' }).end(xmlError('NoSuchUpload'));
        return true;
      }
      return answerAbort(req, res);
    };
    try {
      const r = await putRaw('/s3/gone/a.bin', randomBytes(12 << 20));
      expect([r.code, r.message]).toEqual([500, expect.stringMatching(/NoSuchUpload/)]);
      const dav = await fetch(`${ts.url}/dav/s3/gone/b.bin`, { method: 'PUT', headers: { authorization: davAuth }, body: randomBytes(12 << 20) });
      expect(dav.status).toBe(502);
    } finally {
      rule = () => false;
    }
  }, 60_000);
});

describe('S3: a folder copy whose client goes away while copies are in flight', () => {
  it('leaves nothing at the destination, not even the copies S3 made after the abort (only finished ones were removed)', async () => {
    for (let i = 0; i < 16; i++) ok(await putRaw(`/s3/cp/src/f${String(i).padStart(2, '0')}.txt`, Buffer.from(`file ${i}`)));
    ok(await ts.api('/api/fs/mkdir', { token: admin, body: { path: '/s3/cp/into' } }));
    // CopyObject is done by S3 at once; its answer comes late (a slow link), and the client gives up
    // once S3 has made the first batch of copies (eight at a time), before any answer reached treegate.
    let copies = 0;
    let giveUp = () => undefined as void;
    rule = (req, res) => {
      if (req.method !== 'PUT' || !req.headers['x-amz-copy-source']) return false;
      forward(req, (status, headers, body) => {
        if (++copies === 8) giveUp();
        setTimeout(() => res.writeHead(status, headers).end(body), 400);
      });
      return true;
    };
    try {
      await new Promise<void>((resolve) => {
        const req = request(`${ts.url}/dav/s3/cp/src`, { method: 'COPY', headers: { authorization: davAuth, destination: `${ts.url}/dav/s3/cp/into/src`, depth: 'infinity' } });
        req.on('error', () => resolve());
        req.on('response', (res) => { res.resume(); resolve(); });
        giveUp = () => req.destroy();
        req.end();
      });
      rule = () => false;
      expect(copies).toBe(8);
      // The cleanup follows the abort: looked at until it is done (bounded).
      let left: string[] = [];
      for (let i = 0; i < 50; i++) {
        const r = await ts.api<{ content: Array<{ name: string }> | null }>('/api/fs/list', { token: admin, body: { path: '/s3/cp/into', refresh: true } });
        left = (r.data!.content ?? []).map((e) => e.name);
        if (!left.length) break;
        await new Promise((r2) => setTimeout(r2, 100));
      }
      expect(left).toEqual([]);
    } finally {
      rule = () => false;
    }
  }, 60_000);
});
