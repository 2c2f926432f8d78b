/** The SSRF guard's address judgement and SimpleHttp's file naming, without a server. */
import { describe, expect, it } from 'vitest';
import { magnetUrls, SsrfGuard } from '../src/tasks/offline/ssrf.js';
import { dispositionName, fileNameFor } from '../src/tasks/offline/simple-http.js';

describe('SsrfGuard', () => {
  const guard = new SsrfGuard(() => false);

  it('blocks loopback, private, link-local, CGNAT, multicast and mapped forms; passes public addresses', () => {
    for (const a of ['127.0.0.1', '127.5.5.5', '10.0.0.1', '172.16.3.4', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1',
      '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', 'not-an-ip']) {
      expect(guard.isBlocked(a), a).toBe(true);
    }
    for (const a of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) expect(guard.isBlocked(a), a).toBe(false);
  });

  it('checks literal and resolved hosts, and lets everything through when allowed', async () => {
    await expect(guard.checkUrl(new URL('http://127.0.0.1:1/x'))).rejects.toThrow(/loopback/);
    await expect(guard.checkUrl(new URL('http://localhost/x'))).rejects.toThrow(/loopback/);
    await expect(guard.checkUrl(new URL('http://[::1]/x'))).rejects.toThrow(/loopback/);
    await expect(guard.checkUrl(new URL('magnet:?xt=urn:btih:abc'))).resolves.toBeUndefined();
    await expect(guard.checkUrl(new URL('magnet:?xt=urn:btih:abc&dn=Title: part 2&tr=udp%3A%2F%2F8.8.8.8%3A80'))).resolves.toBeUndefined();
    await expect(new SsrfGuard(() => true).checkUrl(new URL('http://127.0.0.1/x'))).resolves.toBeUndefined();
  });
});

describe('magnet links', () => {
  const guard = new SsrfGuard(() => false);
  const hash = 'c12fe1c06bba254a9dc9f519b335aa7c1367a88a';

  it('checks every URL a magnet carries (tr, ws, as, xs, any URL value, x.pe peers) by the same rule', async () => {
    for (const bad of [
      `tr=${encodeURIComponent('http://127.0.0.1:17603/anything')}`, 'tr.1=udp://10.0.0.1:80', `ws=${encodeURIComponent('http://[::1]/f')}`,
      'as=http://localhost/f', 'xs=https://192.168.1.2/x.torrent', 'mt=http://169.254.169.254/m', 'x.pe=127.0.0.1:6881', 'ws=file:///etc/passwd',
      `xs=${encodeURIComponent('magnet:?tr=http://127.0.0.1/a')}`,
    ]) {
      await expect(guard.checkUrl(new URL(`magnet:?xt=urn:btih:${hash}&tr=udp://8.8.8.8:80&${bad}`)), bad).rejects.toThrow(/loopback, private or link-local/);
    }
    expect(magnetUrls(new URL(`magnet:?xt=urn:btih:${hash}&dn=a+b&xl=3&tr=udp://1.1.1.1:80&ws=http://8.8.8.8/f&x.pe=8.8.4.4:1`)).map(String))
      .toEqual(['udp://1.1.1.1:80', 'http://8.8.8.8/f', 'http://8.8.4.4:1/']);
    await expect(new SsrfGuard(() => true).checkUrl(new URL(`magnet:?xt=urn:btih:${hash}&tr=http://127.0.0.1/a`))).resolves.toBeUndefined();
  });
});

describe('SimpleHttp file names', () => {
  it('uses Content-Disposition (filename* first), never a path', () => {
    expect(dispositionName('attachment; filename="../../etc/passwd"')).toBe('passwd');
    expect(dispositionName("attachment; filename*=UTF-8''na%C3%AFve%20file.txt; filename=\"x\"")).toBe('naïve file.txt');
    expect(dispositionName('attachment; filename=".."')).toBeUndefined();
    expect(dispositionName('inline')).toBeUndefined();
  });

  it('falls back to the last URL segment, then the host', () => {
    expect(fileNameFor(new URL('http://h.example/a/b%20c.iso?x=1'), undefined)).toBe('b c.iso');
    expect(fileNameFor(new URL('http://h.example/a/..%2F..%2Fx'), undefined)).toBe('x');
    expect(fileNameFor(new URL('http://h.example/'), undefined)).toBe('h_example');
    expect(fileNameFor(new URL('http://h.example/d/'), 'attachment; filename="r.bin"')).toBe('r.bin');
  });
});

describe('SimpleHttp redirects', () => {
  it('re-checks every hop: a redirect to a blocked address (literal or by name) is refused', async () => {
    const { createServer } = await import('node:http');
    const { mkdtemp, readdir, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { SimpleHttpTool } = await import('../src/tasks/offline/simple-http.js');
    const hits: string[] = [];
    const server = createServer((req, res) => {
      hits.push(`${req.headers.host} ${req.url}`);
      if (req.url === '/to-literal') return res.writeHead(302, { location: `http://127.0.0.2:${port}/file` }).end();
      if (req.url === '/to-self') return res.writeHead(302, { location: '/file' }).end();
      if (req.url === '/to-name') return res.writeHead(302, { location: `http://localhost:${port}/file` }).end();
      res.writeHead(200, { 'content-length': 2 }).end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '0.0.0.0', r));
    const port = (server.address() as { port: number }).port;
    // Let the first hop (literal 127.0.0.1) through as if it were public; names still go through lookup.
    class Guard extends SsrfGuard {
      override checkLiteral(url: URL): void {
        if (url.hostname !== '127.0.0.1') super.checkLiteral(url);
      }
    }
    const tool = new SimpleHttpTool(new Guard(() => false), () => 0);
    // The resolver for aria2 / qBittorrent follows the same hops without downloading.
    const { resolveRedirects } = await import('../src/tasks/offline/simple-http.js');
    const signal = new AbortController().signal;
    expect(String(await resolveRedirects(new Guard(() => false), new URL(`http://127.0.0.1:${port}/to-self`), signal))).toBe(`http://127.0.0.1:${port}/file`);
    await expect(resolveRedirects(new Guard(() => false), new URL(`http://127.0.0.1:${port}/to-literal`), signal)).rejects.toThrow(/loopback, private or link-local/);
    await expect(resolveRedirects(new Guard(() => false), new URL(`http://127.0.0.1:${port}/to-name`), signal)).rejects.toThrow(/loopback, private or link-local/);
    expect(hits.splice(0)).toEqual([`127.0.0.1:${port} /to-self`, `127.0.0.1:${port} /file`, `127.0.0.1:${port} /to-literal`, `127.0.0.1:${port} /to-name`]);
    const dir = await mkdtemp(join(tmpdir(), 'treegate-ssrf-'));
    const job = (path: string) => ({
      id: 'x', url: new URL(`http://127.0.0.1:${port}${path}`), dir, signal: new AbortController().signal, args: {}, patch: () => undefined, report: () => undefined,
    });
    try {
      await tool.download(job('/file'));
      expect(await readdir(dir)).toEqual(['file']);
      await expect(tool.download(job('/to-literal'))).rejects.toThrow(/loopback, private or link-local/);
      await expect(tool.download(job('/to-name'))).rejects.toThrow(/loopback, private or link-local/);
      expect(hits.filter((h) => h.endsWith(' /file'))).toEqual([`127.0.0.1:${port} /file`]); // no blocked hop was dialled
    } finally {
      server.closeAllConnections();
      server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
