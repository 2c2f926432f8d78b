/**
 * The egress proxy aria2 downloads through (src/tasks/offline/egress-proxy.ts), driven by a real
 * curl on loopback: plain http and CONNECT tunnels reach an allowed host; a name that resolves to a
 * private address when the connection is made (DNS rebinding) is refused then, and the target never
 * sees a byte; no credentials, no proxying.
 */
import { execFile } from 'node:child_process';
import type { LookupAddress } from 'node:dns';
import { createServer, type Server } from 'node:http';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressProxy } from '../src/tasks/offline/egress-proxy.js';
import { SsrfGuard, type Resolver } from '../src/tasks/offline/ssrf.js';

let target: Server;
let port = 0;
const hits: string[] = [];
let allowPrivate = false;
let proxy: EgressProxy;
let proxyUrl = '';

/** A DNS of our own: `files.test` is the loopback target, as a rebinding name is by connect time. */
const resolve: Resolver = (hostname, _opts, cb) => {
  const table: Record<string, LookupAddress[]> = { 'files.test': [{ address: '127.0.0.1', family: 4 }] };
  const found = table[hostname];
  if (found) return cb(null, found);
  cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
};

beforeAll(async () => {
  target = createServer((req, res) => {
    hits.push(`${req.method} ${req.url} host=${req.headers.host} connection=${req.headers.connection}`);
    res.end('hello from the target');
  });
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  port = (target.address() as { port: number }).port;
  proxy = new EgressProxy(new SsrfGuard(() => allowPrivate), pino({ level: 'silent' }), resolve);
  proxyUrl = await proxy.url();
});
afterAll(async () => {
  await proxy?.close();
  await new Promise((r) => target?.close(r));
});

/** curl through the proxy: [HTTP code of the target (or of the proxy's refusal), body, stderr]. */
function curl(url: string, extra: string[] = [], via = proxyUrl): Promise<{ code: string; body: string; err: string }> {
  return new Promise((res) => {
    execFile('curl', ['-s', '-S', '-o', '-', '-w', '\n%{http_code} %{http_connect}', '-x', via, ...extra, url], { timeout: 15_000 }, (_e, out, err) => {
      const lines = String(out).split('\n');
      const [code, connect] = lines.pop()!.split(' ');
      res({ code: code === '000' ? connect! : code!, body: lines.join('\n'), err: String(err) });
    });
  });
}

describe('the egress proxy', () => {
  it('passes plain http (in origin form, Connection: close) and CONNECT tunnels to an allowed host', async () => {
    allowPrivate = true;
    hits.length = 0;
    const plain = await curl(`http://files.test:${port}/a?x=1`);
    expect(plain).toMatchObject({ code: '200', body: 'hello from the target' });
    const tunnel = await curl(`http://files.test:${port}/b`, ['--proxytunnel']);
    expect(tunnel).toMatchObject({ code: '200', body: 'hello from the target' });
    // The tunnel carries curl's own request untouched (it sends no Connection header).
    expect(hits).toEqual([`GET /a?x=1 host=files.test:${port} connection=close`, `GET /b host=files.test:${port} connection=undefined`]);
  });

  it('checks the address when it connects: a name resolving to loopback, or a loopback literal, is refused and never reached', async () => {
    allowPrivate = false;
    hits.length = 0;
    for (const extra of [[], ['--proxytunnel']]) {
      const byName = await curl(`http://files.test:${port}/secret`, extra);
      expect(byName.code, extra.join()).toBe('403');
      const literal = await curl(`http://127.0.0.1:${port}/secret`, extra);
      expect(literal.code, extra.join()).toBe('403');
    }
    expect((await curl(`http://files.test:${port}/secret`)).body).toMatch(/loopback, private or link-local/);
    expect(hits).toEqual([]);
  });

  it('proxies nothing without its credentials, and only GET and HEAD of http URLs', async () => {
    allowPrivate = true;
    hits.length = 0;
    const anonymous = proxyUrl.replace(/\/\/[^@]+@/, '//');
    expect((await curl(`http://files.test:${port}/x`, [], anonymous)).code).toBe('407');
    expect((await curl(`http://files.test:${port}/x`, ['--proxytunnel'], anonymous)).code).toBe('407');
    expect((await curl(`http://files.test:${port}/x`, ['-X', 'POST', '-d', 'a=1'])).code).toBe('405');
    expect((await curl(`ftp://files.test:${port}/x`)).code).toBe('501');
    expect(hits).toEqual([]);
  });
});
