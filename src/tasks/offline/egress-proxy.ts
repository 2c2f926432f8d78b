/**
 * The HTTP proxy aria2 downloads through, so that the SSRF rule (ssrf.ts) holds where it matters:
 * when a connection is made. aria2 resolves and connects by itself; checking a URL when it is added
 * left a window (a name that resolves to a public address for the check and to a private one a
 * moment later, a server that redirects elsewhere the second time). Through this proxy every
 * connection aria2 makes for http and https, redirects included, is resolved here, checked, and
 * made to the address that was checked.
 *
 * A forward proxy of the smallest kind, on loopback only, for aria2 alone (a random password, sent as
 * Proxy-Authorization):
 * - `CONNECT host:port` (https): a tunnel to the checked address;
 * - `GET|HEAD http://host[:port]/path` (plain http): the request goes on in origin form with
 *   `Connection: close`, and the answer comes back; one request per connection, so no later request
 *   on it can reach another host unchecked.
 * Anything else is refused. Whether private addresses are allowed is read at each connection
 * (offline_download_allow_private).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { connect, createServer, isIP, type LookupFunction, type Server, type Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Resolver, SsrfGuard } from './ssrf.js';

const MAX_HEAD = 16 * 1024;
const HEAD_MS = 30_000;
/** A tunnel or answer with no traffic for this long is cut (aria2 has its own, shorter, timeouts). */
const IDLE_MS = 10 * 60_000;
const MAX_CONNECTIONS = 256;
const USER = 'treegate';

/** `HTTP/1.1 <status>` with a short text body, then close. */
function answer(socket: Socket, status: string, text: string, extra = ''): void {
  const body = `${text}\n`;
  socket.end(`HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n${extra}\r\n${body}`);
}

/** The request line and headers of a proxy request (lower-case names, in order). */
function parseHead(head: string): { method: string; target: string; headers: Array<[string, string]> } | undefined {
  const lines = head.split('\r\n');
  const m = /^([A-Z]+) (\S+) HTTP\/1\.[01]$/.exec(lines[0]!);
  if (!m) return undefined;
  const headers: Array<[string, string]> = [];
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':');
    if (i <= 0 || /\s/.test(line.slice(0, i))) return undefined;
    headers.push([line.slice(0, i).toLowerCase(), line.slice(i + 1).trim()]);
  }
  return { method: m[1]!, target: m[2]!, headers };
}

export class EgressProxy {
  private server?: Promise<Server>;
  private readonly password = randomBytes(18).toString('base64url');
  private readonly sockets = new Set<Socket>();

  private readonly lookup: LookupFunction;

  /** `resolve`: how names are resolved (the system's by default; tests give their own). */
  constructor(private readonly guard: SsrfGuard, private readonly log: Logger, resolve?: Resolver) {
    this.lookup = guard.lookup(resolve);
  }

  /** The proxy's URL with its credentials, listening from the first call on. */
  async url(): Promise<string> {
    const server = await (this.server ??= this.listen());
    const { port } = server.address() as { port: number };
    return `http://${USER}:${this.password}@127.0.0.1:${port}`;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise((r) => void server.then((s) => s.close(r), r));
  }

  private listen(): Promise<Server> {
    const server = createServer((socket) => this.accept(socket));
    server.maxConnections = MAX_CONNECTIONS;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve(server));
    });
  }

  private accept(client: Socket): void {
    this.sockets.add(client);
    client.once('close', () => this.sockets.delete(client));
    client.on('error', () => client.destroy());
    client.setTimeout(HEAD_MS, () => client.destroy());
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) {
        if (buffered.length > MAX_HEAD) answer(client, '431 Request Header Fields Too Large', 'request head too large');
        return;
      }
      client.off('data', onData);
      client.pause();
      this.handle(client, buffered.subarray(0, end).toString('latin1'), buffered.subarray(end + 4));
    };
    client.on('data', onData);
  }

  private handle(client: Socket, head: string, rest: Buffer): void {
    const req = parseHead(head);
    if (!req) return answer(client, '400 Bad Request', 'not an HTTP/1 proxy request');
    const auth = req.headers.find(([k]) => k === 'proxy-authorization')?.[1] ?? '';
    const expected = Buffer.from(`Basic ${Buffer.from(`${USER}:${this.password}`).toString('base64')}`);
    const given = Buffer.from(auth);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return answer(client, '407 Proxy Authentication Required', 'proxy authentication required', 'Proxy-Authenticate: Basic realm="treegate"\r\n');
    }
    if (req.method === 'CONNECT') {
      const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/.exec(req.target);
      if (!m) return answer(client, '400 Bad Request', 'CONNECT needs host:port');
      return this.dial(client, m[1]!.replace(/^\[|\]$/g, ''), Number(m[2]), (upstream) => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (rest.length) upstream.write(rest);
        client.pipe(upstream);
        client.resume();
      });
    }
    let url: URL;
    try {
      url = new URL(req.target);
    } catch {
      return answer(client, '400 Bad Request', 'the request target must be an absolute http URL');
    }
    if (url.protocol !== 'http:') return answer(client, '501 Not Implemented', `${url.protocol} is not proxied`);
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(client, '405 Method Not Allowed', 'only GET and HEAD are proxied');
    const hop = new Set(['proxy-authorization', 'proxy-connection', 'connection', 'keep-alive', 'host']);
    const lines = [`${req.method} ${url.pathname}${url.search} HTTP/1.1`, `Host: ${url.host}`];
    for (const [k, v] of req.headers) if (!hop.has(k)) lines.push(`${k}: ${v}`);
    lines.push('Connection: close', '', '');
    this.dial(client, url.hostname.replace(/^\[|\]$/g, ''), Number(url.port || 80), (upstream) => {
      upstream.write(lines.join('\r\n'));
      // GET and HEAD carry no body: what else the client sends is not forwarded.
      client.resume();
    });
  }

  /** Connect to host:port after the SSRF check (at resolution, so on the address used); then `ready`. */
  private dial(client: Socket, host: string, port: number, ready: (upstream: Socket) => void): void {
    if (port < 1 || port > 65535) return answer(client, '400 Bad Request', 'bad port');
    if (isIP(host) && this.guard.enforced() && this.guard.isBlocked(host)) return this.refuse(client, host);
    const upstream = connect({ host, port, lookup: this.lookup, timeout: HEAD_MS });
    this.sockets.add(upstream);
    client.once('close', () => upstream.destroy()); // aria2 gave up, even before the connection was made
    let connected = false;
    upstream.once('close', () => {
      this.sockets.delete(upstream);
      if (connected) client.end();
    });
    upstream.once('timeout', () => upstream.destroy(new Error('connect timed out')));
    upstream.once('error', (e: Error) => {
      if (connected) return client.destroy();
      if (e.message === this.guard.refused().message) return this.refuse(client, host);
      answer(client, '502 Bad Gateway', `cannot reach ${host}:${port}: ${e.message}`);
    });
    upstream.once('connect', () => {
      connected = true;
      upstream.setTimeout(0);
      client.setTimeout(IDLE_MS, () => client.destroy());
      upstream.setTimeout(IDLE_MS, () => upstream.destroy());
      upstream.pipe(client);
      ready(upstream);
    });
  }

  private refuse(client: Socket, host: string): void {
    this.log.info({ host }, 'offline download: connection refused by the SSRF rule');
    answer(client, '403 Forbidden', this.guard.refused().message);
  }
}
