#!/usr/bin/env node
/**
 * Focused WebDAV benchmark of the metadata-bound paths (run by hand, not a test): a Depth-1
 * PROPFIND of a big folder and many sequential 1 KiB PUTs, treegate vs nginx's dav module in one
 * run (this machine is shared, so only ratios within a run are comparable).
 *
 *   npm run build && node bench/small-files.mjs [--entries 10000] [--puts 1000] [--rounds 2] [--no-nginx] [--prof DIR]
 *
 * `--prof DIR` starts treegate with `--cpu-prof --cpu-prof-dir DIR` (stopped with SIGINT, so the
 * profile is written). Needs nginx and libnginx-mod-http-dav-ext unless --no-nginx.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : def;
};
const ENTRIES = Number(opt('entries', '10000'));
const PUTS = Number(opt('puts', '1000'));
const ROUNDS = Number(opt('rounds', '2'));
const PROF = opt('prof', undefined);
const NGINX = !argv.includes('--no-nginx');
const USER = 'admin';
const PASS = 'bench-password-123';
const CLI = resolve(import.meta.dirname, '../dist/src/cli.js');
const NGINX_DAV_EXT = '/usr/lib/nginx/modules/ngx_http_dav_ext_module.so';
if (!existsSync(CLI)) throw new Error('build first: npm run build');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const freePort = () =>
  new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
const children = [];
function start(cmd, args, opts = {}) {
  const c = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'], ...opts });
  children.push(c);
  return c;
}
async function waitHttp(url, ms = 30_000) {
  for (const until = Date.now() + ms; Date.now() < until; await sleep(100)) {
    const ok = await new Promise((r) => http.get(url, (res) => (res.resume(), r(true))).on('error', () => r(false)));
    if (ok) return;
  }
  throw new Error(`${url} did not come up`);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const auth = 'Basic ' + Buffer.from(`${USER}:${PASS}`).toString('base64');
function request(base, path, method, headers, body) {
  const u = new URL(base);
  return new Promise((res, rej) => {
    const r = http.request({ host: u.hostname, port: u.port, path: u.pathname + path, method, agent, headers: { authorization: auth, ...headers } }, (resp) => {
      let n = 0;
      resp.on('data', (b) => (n += b.length));
      resp.on('end', () => (resp.statusCode < 300 ? res(n) : rej(new Error(`${method} ${path}: ${resp.statusCode}`))));
    });
    r.on('error', rej);
    r.end(body);
  });
}
async function propfind(base) {
  let best = Infinity;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    await request(base, 'many/', 'PROPFIND', { depth: '1' });
    best = Math.min(best, performance.now() - t0);
  }
  return best / 1000;
}
async function puts(base, round) {
  const body = Buffer.alloc(1024, 120);
  await request(base, `small${round}/`, 'MKCOL', {});
  const t0 = performance.now();
  for (let i = 0; i < PUTS; i++) await request(base, `small${round}/f${i}.bin`, 'PUT', { 'content-length': body.length }, body);
  return (performance.now() - t0) / 1000;
}
async function seed(root) {
  await mkdir(join(root, 'many'), { recursive: true });
  for (let i = 0; i < ENTRIES; i += 500) {
    await Promise.all(Array.from({ length: Math.min(500, ENTRIES - i) }, (_, j) => writeFile(join(root, 'many', `entry-${i + j}.txt`), '')));
  }
}

const work = await mkdtemp(join(tmpdir(), 'tg-small-'));
try {
  const tgData = join(work, 'tg');
  await mkdir(tgData);
  const tgPort = await freePort();
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, TREEGATE_HTTP_ADDRESS: '127.0.0.1', TREEGATE_HTTP_PORT: String(tgPort), TREEGATE_SFTP_ENABLE: 'false', TREEGATE_ADMIN_PASSWORD: PASS, TREEGATE_LOG_LEVEL: 'info' };
  const nodeArgs = PROF ? ['--cpu-prof', '--cpu-prof-dir', resolve(PROF)] : [];
  const tg = start(process.execPath, [...nodeArgs, CLI, 'server', '--data', tgData], { env });
  await waitHttp(`http://127.0.0.1:${tgPort}/ping`);
  await seed(join(tgData, 'storage'));
  const servers = [{ name: 'treegate', base: `http://127.0.0.1:${tgPort}/dav/` }];
  if (NGINX) {
    const ngRoot = join(work, 'ng-root');
    await seed(ngRoot);
    const ngPort = await freePort();
    await writeFile(join(work, 'htpasswd'), `${USER}:{SHA}${createHash('sha1').update(PASS).digest('base64')}\n`);
    await mkdir(join(work, 'ng-tmp'));
    await writeFile(join(work, 'nginx.conf'), `load_module ${NGINX_DAV_EXT};
user root root; daemon off; worker_processes 1; pid ${work}/nginx.pid; error_log ${work}/nginx-error.log;
events { worker_connections 256; }
http {
  access_log ${work}/nginx-access.log; client_body_temp_path ${work}/ng-tmp;
  proxy_temp_path ${work}/ng-tmp; fastcgi_temp_path ${work}/ng-tmp; uwsgi_temp_path ${work}/ng-tmp; scgi_temp_path ${work}/ng-tmp;
  server {
    listen 127.0.0.1:${ngPort}; root ${ngRoot}; client_max_body_size 0;
    location / {
      auth_basic "bench"; auth_basic_user_file ${work}/htpasswd;
      dav_methods PUT DELETE MKCOL COPY MOVE; dav_ext_methods PROPFIND OPTIONS LOCK UNLOCK; create_full_put_path on;
    }
  }
}
`);
    start('nginx', ['-c', join(work, 'nginx.conf'), '-e', join(work, 'nginx-error.log')]);
    await waitHttp(`http://127.0.0.1:${ngPort}/`);
    servers.push({ name: 'nginx', base: `http://127.0.0.1:${ngPort}/` });
  }
  const best = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of servers) {
      const r = (best[s.name] ??= { propfind: Infinity, puts: Infinity });
      r.propfind = Math.min(r.propfind, await propfind(s.base));
      r.puts = Math.min(r.puts, await puts(s.base, round));
    }
  }
  for (const s of servers) {
    const r = best[s.name];
    console.log(`${s.name.padEnd(9)} PROPFIND(${ENTRIES}) ${r.propfind.toFixed(3)} s   ${PUTS} PUTs ${r.puts.toFixed(3)} s (${(PUTS / r.puts).toFixed(0)}/s)`);
  }
  if (NGINX) {
    const t = best.treegate;
    const n = best.nginx;
    console.log(`treegate vs nginx (higher is better): PROPFIND ${(n.propfind / t.propfind).toFixed(2)}x   small PUTs ${(n.puts / t.puts).toFixed(2)}x`);
  }
  if (PROF) {
    tg.kill('SIGINT');
    await new Promise((r) => tg.once('exit', r));
  }
} finally {
  agent.destroy();
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  await sleep(300);
  await rm(work, { recursive: true, force: true });
}
