#!/usr/bin/env node
/**
 * WebDAV benchmark (run by hand, not a test): treegate vs nginx's dav module vs `rclone serve
 * webdav` vs a bare node:http server doing only the same file work (bench/servers/node-floor-dav.mjs: the
 * floor for any Node server), in one run on loopback, each serving its own copy of the same data.
 *
 *   npm run build && node bench/webdav.mjs [--size-mib 1024] [--entries 10000] [--puts 1000] [--rounds 5]
 *
 * Measures GET and PUT of a 1 GiB file (curl), a Depth-1 PROPFIND of a 10,000-entry folder (curl,
 * best of 3) and 1,000 sequential PUTs of 1 KiB (one keep-alive connection); prints the figures,
 * treegate's ratios to nginx and treegate's peak RSS (VmHWM). Needs nginx,
 * libnginx-mod-http-dav-ext, rclone and curl (apt-get install -y nginx libnginx-mod-http-dav-ext rclone curl).
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { link, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const SIZE_MIB = arg('size-mib', 1024);
const ENTRIES = arg('entries', 10_000);
const PUTS = arg('puts', 1000);
const ROUNDS = arg('rounds', 5); // single rounds of the 1 GiB PUT swing 0.45-1.5x; five give a steadier median
const USER = 'admin';
const PASS = 'bench-password-123';
const CLI = resolve(import.meta.dirname, '../dist/src/cli.js');
const NGINX_DAV_EXT = '/usr/lib/nginx/modules/ngx_http_dav_ext_module.so';

for (const [bin, pkg] of [['nginx', 'nginx'], ['rclone', 'rclone'], ['curl', 'curl']]) {
  try {
    execFileSync('sh', ['-c', `command -v ${bin}`]);
  } catch {
    throw new Error(`${bin} missing: apt-get install -y ${pkg}`);
  }
}
if (!existsSync(NGINX_DAV_EXT)) throw new Error('apt-get install -y libnginx-mod-http-dav-ext');
if (!existsSync(CLI)) throw new Error('build first: npm run build');

const freePort = () =>
  new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const children = [];
function start(cmd, args, opts = {}) {
  const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  let out = '';
  c.stdout.on('data', (b) => (out += b));
  c.stderr.on('data', (b) => (out += b));
  children.push(c);
  c.output = () => out;
  return c;
}
async function waitHttp(url, ms = 20_000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const ok = await new Promise((r) => http.get(url, (res) => (res.resume(), r(true))).on('error', () => r(false)));
    if (ok) return;
    await sleep(100);
  }
  throw new Error(`${url} did not come up`);
}
function curlTime(args) {
  const out = execFileSync('curl', ['-sS', '-o', '/dev/null', '-u', `${USER}:${PASS}`, '-w', '%{time_total} %{http_code}', ...args], { maxBuffer: 1 << 20 });
  const [t, code] = String(out).trim().split(' ');
  if (!/^2\d\d$/.test(code)) throw new Error(`curl ${args.join(' ')}: HTTP ${code}`);
  return Number(t);
}
/** n sequential 1 KiB PUTs of new files (named after `tag`) on one keep-alive connection; seconds. */
async function smallPuts(base, n, tag) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const auth = 'Basic ' + Buffer.from(`${USER}:${PASS}`).toString('base64');
  const body = Buffer.alloc(1024, 120);
  const u = new URL(base);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    await new Promise((res, rej) => {
      const r = http.request(
        { host: u.hostname, port: u.port, path: `${u.pathname}small/${tag}-f${i}.bin`, method: 'PUT', agent, headers: { authorization: auth, 'content-length': body.length } },
        (resp) => {
          resp.resume();
          resp.on('end', () => (resp.statusCode < 300 ? res() : rej(new Error(`PUT ${resp.statusCode}`))));
        },
      );
      r.on('error', rej);
      r.end(body);
    });
  }
  agent.destroy();
  return (performance.now() - t0) / 1000;
}

const work = await mkdtemp(join(tmpdir(), 'tg-bench-'));
process.on('exit', () => children.forEach((c) => c.exitCode === null && c.kill('SIGTERM')));
try {
  console.log(`preparing ${SIZE_MIB} MiB file and ${ENTRIES} entries in ${work} ...`);
  const big = join(work, 'big.bin');
  execFileSync('sh', ['-c', `head -c ${SIZE_MIB}M /dev/urandom > ${big}`]);
  async function seed(root) {
    await mkdir(join(root, 'many'), { recursive: true });
    await link(big, join(root, 'big.bin'));
    for (let i = 0; i < ENTRIES; i += 500) {
      await Promise.all(Array.from({ length: Math.min(500, ENTRIES - i) }, (_, j) => writeFile(join(root, 'many', `entry-${i + j}.txt`), '')));
    }
  }

  // treegate (built CLI, own data dir; Local storage at / is DATA/storage)
  const tgData = join(work, 'tg');
  await mkdir(tgData);
  const tgPort = await freePort();
  const tgEnv = { PATH: process.env.PATH, HOME: process.env.HOME, TREEGATE_HTTP_ADDRESS: '127.0.0.1', TREEGATE_HTTP_PORT: String(tgPort), TREEGATE_SFTP_ENABLE: 'false', TREEGATE_ADMIN_PASSWORD: PASS, TREEGATE_LOG_LEVEL: 'info' };
  const tg = start(process.execPath, [CLI, 'server', '--data', tgData], { env: tgEnv });
  await waitHttp(`http://127.0.0.1:${tgPort}/ping`);
  // One tree on disk serves every server (treegate's storage folder): creating a file costs 15 or
  // 400 µs here depending on the ext4 block group its folder landed in, so separate copies measured
  // placement luck. Uploads use per-server names.
  const shared = join(tgData, 'storage');
  await seed(shared);
  await mkdir(join(shared, 'small'));

  // nginx with the dav and dav-ext modules, {SHA} htpasswd. Its upload temp files are made in the
  // folder the small PUTs go to, as treegate's and the floor's are: where files are created is what
  // the 1 KiB PUT case measures most (see above), so a temp folder of its own would be another draw.
  const ngRoot = shared;
  const ngPort = await freePort();
  const sha = createHash('sha1').update(PASS).digest('base64');
  await writeFile(join(work, 'htpasswd'), `${USER}:{SHA}${sha}\n`);
  await mkdir(join(work, 'ng-tmp'));
  await writeFile(
    join(work, 'nginx.conf'),
    `load_module ${NGINX_DAV_EXT};
user root root; daemon off; worker_processes 1; pid ${work}/nginx.pid; error_log ${work}/nginx-error.log;
events { worker_connections 256; }
http {
  access_log ${work}/nginx-access.log; sendfile on; client_body_temp_path ${shared}/small;
  proxy_temp_path ${work}/ng-tmp; fastcgi_temp_path ${work}/ng-tmp; uwsgi_temp_path ${work}/ng-tmp; scgi_temp_path ${work}/ng-tmp;
  server {
    listen 127.0.0.1:${ngPort};
    root ${ngRoot};
    client_max_body_size 0;
    location / {
      auth_basic "bench"; auth_basic_user_file ${work}/htpasswd;
      dav_methods PUT DELETE MKCOL COPY MOVE; dav_ext_methods PROPFIND OPTIONS LOCK UNLOCK;
      create_full_put_path on;
    }
  }
}
`,
  );
  start('nginx', ['-c', join(work, 'nginx.conf'), '-e', join(work, 'nginx-error.log')]);
  await waitHttp(`http://127.0.0.1:${ngPort}/`);

  // rclone serve webdav
  const rcRoot = shared;
  const rcPort = await freePort();
  start('rclone', ['serve', 'webdav', rcRoot, '--addr', `127.0.0.1:${rcPort}`, '--user', USER, '--pass', PASS, '--config', '/dev/null']);
  await waitHttp(`http://127.0.0.1:${rcPort}/`);

  // The floor: the least a node:http server must do for these cases (bench/servers/node-floor-dav.mjs).
  const flRoot = shared;
  const flPort = await freePort();
  start(process.execPath, [join(import.meta.dirname, 'servers', 'node-floor-dav.mjs'), flRoot, String(flPort)]);
  await waitHttp(`http://127.0.0.1:${flPort}/big.bin`);

  const servers = [
    { name: 'treegate', base: `http://127.0.0.1:${tgPort}/dav/` },
    { name: 'nginx', base: `http://127.0.0.1:${ngPort}/` },
    { name: 'rclone', base: `http://127.0.0.1:${rcPort}/` },
    { name: 'node-floor', base: `http://127.0.0.1:${flPort}/` },
  ];
  // Interleaved rounds: every round measures every case on every server, in a rotating order, so a
  // slow spell of this shared machine hits all servers alike; each case's ratio is computed per
  // round and the median round is reported (the spread shows how noisy the run was).
  const rounds = servers.map(() => []);
  const hwmKiB = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${tg.pid}/status`, 'utf8'))?.[1] ?? 0);
  const mib = (kb) => (kb ? (Number(kb) / 1024).toFixed(0) : '?');
  const hwmRises = [];
  for (const s of servers) {
    curlTime([s.base + 'big.bin']); // warm the page cache
    // Warm the small-PUT path too: a JIT-compiled server (treegate, the floor) runs its first few
    // hundred requests unoptimised, which is start-up, not the steady state a long-running server
    // is in (it made treegate's first round 3x slower than its others).
    await smallPuts(s.base, 300, `${s.name}-warm`);
  }
  let lastHwm = hwmKiB();
  hwmRises.push(`start-up and warm-up ${mib(lastHwm)}`);
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < servers.length; k++) {
      const i = (k + round) % servers.length;
      const s = servers[i];
      const r = {};
      // Which case raised treegate's peak RSS (VmHWM), and by how much: a peak is a phase's doing.
      const mark = (c) => {
        if (i !== 0) return;
        const now = hwmKiB();
        if (now > lastHwm) hwmRises.push(`round ${round + 1} ${c} ${mib(lastHwm)}->${mib(now)}`);
        lastHwm = now;
      };
      // Each case starts with no dirty pages left by the one before (writeback of a 1 GiB upload
      // slows every file system call for seconds, and would fall on whichever server runs next).
      execFileSync('sync');
      r.get = Math.min(curlTime([s.base + 'big.bin']), curlTime([s.base + 'big.bin']));
      mark('GET');
      r.put = curlTime(['-T', big, `${s.base}up-${s.name}.bin`]);
      mark('PUT');
      execFileSync('sync');
      const pf = ['-X', 'PROPFIND', '-H', 'Depth: 1', s.base + 'many/'];
      curlTime(pf);
      r.propfind = Math.min(curlTime(pf), curlTime(pf), curlTime(pf));
      mark('PROPFIND');
      execFileSync('sync');
      r.puts = await smallPuts(s.base, PUTS, `${s.name}-r${round}`);
      mark('small PUTs');
      rounds[i].push(r);
      console.log(`round ${round + 1} ${s.name.padEnd(10)} GET ${(SIZE_MIB / r.get).toFixed(0)} MiB/s  PUT ${(SIZE_MIB / r.put).toFixed(0)} MiB/s  PROPFIND(${ENTRIES}) ${r.propfind.toFixed(3)} s  ${PUTS} PUTs ${(PUTS / r.puts).toFixed(0)}/s`);
    }
  }
  const median = (a) => [...a].sort((x, y) => x - y)[Math.floor((a.length - 1) / 2)];
  /** Per-round speed ratios of server `a` to server `b` (times: b / a), as "median (min-max)". */
  const ratio = (a, b, key) => {
    const rs = rounds[a].map((r, j) => rounds[b][j][key] / r[key]);
    return `${median(rs).toFixed(2)}x (${Math.min(...rs).toFixed(2)}-${Math.max(...rs).toFixed(2)})`;
  };
  const t = rounds[0];
  const rss = hwmKiB();
  const rssNow = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${tg.pid}/status`, 'utf8'))?.[1];
  // "Back under 150 MB after": read again once the server has been idle a moment (it trims malloc
  // 2 s after a big transfer: src/mem-trim.ts).
  await sleep(3000);
  const rssIdle = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${tg.pid}/status`, 'utf8'))?.[1];
  console.log(`\ntreegate vs nginx, median of ${ROUNDS} interleaved rounds (range) (higher is better; targets GET >= 0.6, PUT >= 0.8, small PUTs >= 0.5):`);
  console.log(`  GET ${ratio(0, 1, 'get')}   PUT ${ratio(0, 1, 'put')}   PROPFIND ${ratio(0, 1, 'propfind')}   small PUTs ${ratio(0, 1, 'puts')}`);
  console.log(`treegate vs rclone: GET ${ratio(0, 2, 'get')}   PUT ${ratio(0, 2, 'put')}   PROPFIND ${ratio(0, 2, 'propfind')}   small PUTs ${ratio(0, 2, 'puts')}`);
  console.log(`treegate vs node-floor (a bare node:http server doing only the same file work): GET ${ratio(0, 3, 'get')}   PUT ${ratio(0, 3, 'put')}   small PUTs ${ratio(0, 3, 'puts')}`);
  console.log(`node-floor vs nginx (what Node itself reaches): GET ${ratio(3, 1, 'get')}   PUT ${ratio(3, 1, 'put')}   small PUTs ${ratio(3, 1, 'puts')}`);
  console.log(`treegate PROPFIND of ${ENTRIES} entries: median ${median(t.map((r) => r.propfind)).toFixed(3)} s (target < 0.15 s); peak RSS ${mib(rss)} MiB (target < 200 MB), ${mib(rssNow)} MiB right after the last request, ${mib(rssIdle)} MiB after 3 s idle (target < 150 MB)`);
  console.log(`treegate peak RSS by phase (MiB): ${hwmRises.join(', ')}`);
} finally {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  await sleep(500);
  await rm(work, { recursive: true, force: true });
}
