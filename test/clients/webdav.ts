/**
 * WebDAV test clients: a tiny fetch-based client for exact status/header checks, and wrappers that
 * run the real tools (litmus, rclone, davfs2) bounded in time. A missing tool fails with the
 * install hint instead of skipping.
 */
import { execFile, spawnSync } from 'node:child_process';
import { request } from 'node:http';

export const DAV = '/dav';

/** Fail (never skip) when a Debian tool is missing. */
export function requireTool(bin: string, pkg: string): void {
  const r = spawnSync('sh', ['-c', `command -v ${bin}`]);
  if (r.status !== 0) throw new Error(`${bin} is not installed: run \`apt-get install -y ${pkg}\``);
}

export interface DavResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One raw HTTP request (node:http, so any method and header is allowed, no redirects followed). */
export function davRequest(
  base: string,
  method: string,
  path: string,
  opts: { user?: string; password?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<DavResponse> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.user !== undefined) headers.authorization = 'Basic ' + Buffer.from(`${opts.user}:${opts.password ?? ''}`).toString('base64');
  if (opts.body !== undefined) headers['content-length'] = String(Buffer.byteLength(opts.body));
  return new Promise((resolve, reject) => {
    const u = new URL(base);
    // host/port/path given apart: a URL string would have its dot segments resolved by WHATWG parsing.
    const req = request({ host: u.hostname, port: u.port, path, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path}: timeout`)));
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** A client bound to one server and one user. */
export function davClient(base: string, user: string, password: string) {
  return (method: string, path: string, opts: { headers?: Record<string, string>; body?: string | Buffer } = {}) =>
    davRequest(base, method, DAV + path, { ...opts, user, password });
}
export type DavClient = ReturnType<typeof davClient>;

/** Run a command with a time bound; resolves with code and output (never rejects on exit code). */
export function run(cmd: string, args: string[], opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv; cwd?: string } = {}) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      cmd,
      args,
      { timeout: opts.timeoutMs ?? 120_000, env: opts.env ?? process.env, cwd: opts.cwd, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) }),
    );
  });
}

export interface LitmusSuite {
  name: string;
  run: number;
  passed: number;
  failed: number;
}

/** Parse litmus's `<- summary for `x': of N tests run: P passed, F failed.` lines and warnings. */
export function parseLitmus(out: string): { suites: LitmusSuite[]; warnings: string[]; failures: string[] } {
  const suites: LitmusSuite[] = [];
  for (const m of out.matchAll(/summary for `(\w+)': of (\d+) tests run: (\d+) passed, (\d+) failed/g)) {
    suites.push({ name: m[1]!, run: Number(m[2]), passed: Number(m[3]), failed: Number(m[4]) });
  }
  const lines = out.split('\n');
  return {
    suites,
    warnings: lines.filter((l) => /WARNING/.test(l)).map((l) => l.trim()),
    failures: lines.filter((l) => /\bFAIL\b/.test(l)).map((l) => l.trim()),
  };
}

/** rclone with a connection-string WebDAV remote (no config file). */
export async function rcloneArgs(url: string, user: string, password: string): Promise<string[]> {
  const obscured = (await run('rclone', ['obscure', password])).stdout.trim();
  return ['--webdav-url', url, '--webdav-user', user, '--webdav-pass', obscured, '--webdav-vendor', 'other', '--config', '/dev/null'];
}

/**
 * A PUT of `total` bytes whose body is sent by the caller (`req.write`, then `req.end`), so a test
 * can act while the upload is under way; `status` settles with the answer's status.
 */
export function openDavPut(base: string, path: string, total: number, user: string, password: string) {
  const u = new URL(base);
  const req = request({
    host: u.hostname, port: u.port, method: 'PUT', path,
    headers: { authorization: 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64'), 'content-length': total },
  });
  const status = new Promise<number>((resolve, reject) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
  });
  return { req, status };
}
