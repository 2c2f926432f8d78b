#!/usr/bin/env node
/**
 * Streaming check (not a test): start the built server (`node dist/src/cli.js server`) on a temp
 * data dir, PUT a 1 GiB file through /api/fs/put and GET it back through /d, sampling the server's
 * RSS from /proc/<pid>/status every 20 ms. Prints the peak RSS; exits 1 when it is >= the target.
 *
 *   npm run build && node bench/rss-1gib.mjs [--size-mib 1024] [--target-mb 150]
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const SIZE = arg('size-mib', 1024) * 1024 * 1024;
const TARGET_MB = arg('target-mb', 150);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const PASSWORD = 'bench-password-1';

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

async function rssKb(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function sampler(pid) {
  let peak = 0;
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      peak = Math.max(peak, await rssKb(pid));
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return { peak: () => peak, stop: async () => { stop = true; await loop; } };
}

async function api(base, path, body, token) {
  const res = await fetch(base + path, {
    method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: token } : {}) }, body: JSON.stringify(body),
  });
  const env = await res.json();
  if (env.code !== 200) throw new Error(`${path}: ${env.code} ${env.message}`);
  return env.data;
}

/** PUT SIZE bytes of a repeating 1 MiB pseudo-random block, honouring backpressure. */
function upload(port, token, filePath, hash) {
  const block = createHash('sha512').update('treegate').digest();
  const chunk = Buffer.alloc(1 << 20);
  for (let i = 0; i < chunk.length; i += block.length) block.copy(chunk, i);
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1', port, method: 'PUT', path: '/api/fs/put',
      headers: { authorization: token, 'file-path': encodeURIComponent(filePath), 'content-length': String(SIZE), 'content-type': 'application/octet-stream' },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        const env = JSON.parse(text);
        env.code === 200 ? resolve() : reject(new Error(`upload: ${env.code} ${env.message}`));
      });
    });
    req.on('error', reject);
    let sent = 0;
    const pump = () => {
      while (sent < SIZE) {
        const n = Math.min(chunk.length, SIZE - sent);
        const piece = n === chunk.length ? chunk : chunk.subarray(0, n);
        hash.update(piece);
        sent += n;
        if (!req.write(piece)) return void req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
}

function download(port, path, hash) {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, method: 'GET', path }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`download: HTTP ${res.statusCode}`));
      let n = 0;
      res.on('data', (d) => { n += d.length; hash.update(d); });
      res.on('end', () => resolve(n));
      res.on('error', reject);
    }).on('error', reject).end();
  });
}

const data = await mkdtemp(join(tmpdir(), 'treegate-bench-'));
const port = await freePort();
const child = spawn(process.execPath, [join(ROOT, 'dist/src/cli.js'), 'server', '--data', data], {
  env: { ...process.env, TREEGATE_HTTP_ADDRESS: '127.0.0.1', TREEGATE_HTTP_PORT: String(port), TREEGATE_SFTP_ENABLE: 'false', TREEGATE_ADMIN_PASSWORD: PASSWORD, TREEGATE_LOG_LEVEL: 'warn' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const base = `http://127.0.0.1:${port}`;
let code = 1;
try {
  for (let i = 0; ; i++) {
    if (i > 300) throw new Error('server did not start');
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      if ((await fetch(base + '/ping')).ok) break;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  const idle = await rssKb(child.pid);
  const { token } = await api(base, '/api/auth/login', { username: 'admin', password: PASSWORD });
  const s = sampler(child.pid);
  const up = createHash('sha256');
  let t = Date.now();
  await upload(port, token, '/bench/big.bin', up);
  const upSec = (Date.now() - t) / 1000;
  const upPeak = s.peak();
  const listing = await api(base, '/api/fs/list', { path: '/bench' }, token);
  const sign = listing.content.find((e) => e.name === 'big.bin')?.sign ?? '';
  const down = createHash('sha256');
  t = Date.now();
  const got = await download(port, `/d/bench/big.bin${sign ? `?sign=${encodeURIComponent(sign)}` : ''}`, down);
  const downSec = (Date.now() - t) / 1000;
  await s.stop();
  const mib = SIZE / 1048576;
  const peakMb = s.peak() / 1024;
  const same = got === SIZE && up.digest('hex') === down.digest('hex');
  console.log(`size            ${mib} MiB`);
  console.log(`idle RSS        ${(idle / 1024).toFixed(1)} MB`);
  console.log(`upload          ${upSec.toFixed(1)} s (${(mib / upSec).toFixed(0)} MiB/s), peak RSS ${(upPeak / 1024).toFixed(1)} MB`);
  console.log(`download        ${downSec.toFixed(1)} s (${(mib / downSec).toFixed(0)} MiB/s), bytes ${got}, content ${same ? 'identical' : 'DIFFERENT'}`);
  console.log(`peak RSS        ${peakMb.toFixed(1)} MB (target < ${TARGET_MB} MB): ${peakMb < TARGET_MB && same ? 'PASS' : 'FAIL'}`);
  code = peakMb < TARGET_MB && same ? 0 : 1;
} catch (e) {
  console.error(e);
} finally {
  child.kill('SIGTERM');
  await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
  await rm(data, { recursive: true, force: true });
}
process.exit(code);
