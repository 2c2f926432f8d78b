/**
 * Start a whole treegate (REST + WebDAV + SFTP) in-process on ephemeral loopback ports with a fresh
 * temp DATA dir, and talk to it. One server per test file; close it in afterAll.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { startServer, type RunningServer } from '../src/server.js';
import type { Envelope } from '../protocols/rest/envelope.js';

export const ADMIN_PASSWORD = 'admin-test-password';

export interface TestServer {
  running: RunningServer;
  dataDir: string;
  /** `http://127.0.0.1:<port>` */
  url: string;
  sftpPort: number;
  /** Every log line the server wrote (JSON text). */
  logs: string[];
  /** Log in and return the token. */
  login(username?: string, password?: string): Promise<string>;
  /** Call a JSON endpoint; returns the envelope. GET when body is undefined and method not given. */
  api<T = unknown>(path: string, opts?: { body?: unknown; token?: string; method?: string; headers?: Record<string, string> }): Promise<Envelope<T>>;
  close(): Promise<void>;
}

export async function startTestServer(opts: { env?: Record<string, string>; dataDir?: string } = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'treegate-test-')));
  const logs: string[] = [];
  const dest = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      cb();
    },
  });
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    TREEGATE_HTTP_ADDRESS: '127.0.0.1',
    TREEGATE_HTTP_PORT: '0',
    TREEGATE_SFTP_PORT: '0',
    TREEGATE_ADMIN_PASSWORD: ADMIN_PASSWORD,
    TREEGATE_LOG_LEVEL: 'info',
    ...opts.env,
  };
  const running = await startServer({ data: dataDir }, { env, logDestination: dest });
  const url = `http://127.0.0.1:${running.http.port}`;

  const api: TestServer['api'] = async (path, o = {}) => {
    const method = o.method ?? (o.body === undefined ? 'GET' : 'POST');
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (o.token) headers.authorization = o.token;
    if (o.body !== undefined && typeof o.body !== 'string') headers['content-type'] ??= 'application/json';
    const res = await fetch(url + path, {
      method,
      headers,
      body: o.body === undefined ? undefined : typeof o.body === 'string' ? o.body : JSON.stringify(o.body),
    });
    const text = await res.text();
    try {
      return JSON.parse(text) as Envelope<never>;
    } catch {
      throw new Error(`${method} ${path}: HTTP ${res.status}, not JSON: ${text.slice(0, 200)}`);
    }
  };

  const login = async (username = 'admin', password = ADMIN_PASSWORD) => {
    const r = await api<{ token: string }>('/api/auth/login', { body: { username, password } });
    if (r.code !== 200 || !r.data) throw new Error(`login ${username} failed: ${r.code} ${r.message}`);
    return r.data.token;
  };

  return {
    running,
    dataDir,
    url,
    sftpPort: running.sftp?.port ?? 0,
    logs,
    login,
    api,
    close: async () => {
      await running.close();
      if (!opts.dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
