#!/usr/bin/env node
/**
 * SFTP benchmark (not a test): treegate's SFTP server vs OpenSSH's sshd (internal-sftp), both on
 * loopback in the same run, driven by the same OpenSSH `sftp` client. Prints seconds per case, the
 * ratio treegate/OpenSSH (time: 1.00 = as fast, 2.00 = twice as slow) and treegate's peak RSS.
 *
 *   node bench/sftp.mjs [--size-mib 1024] [--files 10000] [--small 1000] [--repeat 1] [--cli PATH] [--no-build]
 *                       [--only REGEX] [--node-args "--cpu-prof --cpu-prof-dir=/tmp/prof"] [--server-log FILE]
 *
 * --only runs just the cases whose label matches; --node-args are passed to treegate's node (to
 * profile it: a CPU profile is written when the bench stops it with SIGTERM).
 *
 * treegate runs from a build in .tmp/bench-dist (made here with tsc unless --cli/--no-build).
 * Needs openssh-client and openssh-server (apt-get install -y openssh-client openssh-server).
 * Client and servers share this machine's cores: figures are client + server CPU (testing.md).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : def;
};
const SIZE_MIB = Number(opt('size-mib', '1024'));
const FILES = Number(opt('files', '10000'));
const SMALL = Number(opt('small', '1000'));
/** Runs per case; the fastest counts (this machine's speed drifts, and other work shares it). */
const REPEAT = Number(opt('repeat', '1'));
const ONLY = new RegExp(opt('only', ''));
const NODE_ARGS = opt('node-args', '').split(' ').filter(Boolean);
const SERVER_LOG = opt('server-log', '');
const CIPHERS = ['aes128-gcm@openssh.com', 'chacha20-poly1305@openssh.com'];
const ADMIN_PASSWORD = 'bench-admin-password';

for (const [bin, pkg] of [['sftp', 'openssh-client'], ['ssh-keygen', 'openssh-client'], ['/usr/sbin/sshd', 'openssh-server']]) {
  if (spawnSync('sh', ['-c', `command -v ${bin}`]).status !== 0) throw new Error(`${bin} missing: apt-get install -y ${pkg}`);
}

const children = [];
const cleanups = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

async function waitPort(port, ms = 20_000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) {
    const ok = await new Promise((r) => {
      const c = createConnection({ host: '127.0.0.1', port }, () => (c.end(), r(true)));
      c.once('error', () => r(false));
    });
    if (ok) return;
  }
  throw new Error(`port ${port} never opened`);
}

function build() {
  const cli = opt('cli', join(ROOT, '.tmp/bench-dist/src/cli.js'));
  if (argv.includes('--no-build') || opt('cli')) return cli;
  console.log('building treegate into .tmp/bench-dist …');
  // tsc emits even when unrelated files have type errors; only a missing cli.js is fatal.
  spawnSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', join(ROOT, 'tsconfig.json'), '--outDir', join(ROOT, '.tmp/bench-dist')], { stdio: 'ignore' });
  if (!existsSync(cli)) throw new Error(`build failed: ${cli} missing`);
  return cli;
}

async function startTreegate(cli, work, pubKey) {
  const data = join(work, 'treegate-data');
  const child = spawn(process.execPath, [...NODE_ARGS, cli, 'server', '--data', data], {
    env: {
      PATH: process.env.PATH, HOME: process.env.HOME, TREEGATE_HTTP_ADDRESS: '127.0.0.1', TREEGATE_HTTP_PORT: '0',
      TREEGATE_SFTP_PORT: '0', TREEGATE_ADMIN_PASSWORD: ADMIN_PASSWORD, TREEGATE_LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  // --server-log FILE keeps treegate's own output (e.g. with --node-args --trace-gc).
  if (SERVER_LOG) {
    const log = createWriteStream(SERVER_LOG);
    child.stdout.pipe(log);
    child.stderr.pipe(log);
  }
  let out = '';
  const ports = await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`treegate not ready:\n${out}`)), 60_000);
    const on = (b) => {
      out += b;
      const m = /treegate ready: http:\/\/[^:]+:(\d+) sftp:\/\/[^:]+:(\d+)/.exec(out);
      if (m) (clearTimeout(t), res({ http: Number(m[1]), sftp: Number(m[2]) }));
    };
    child.stdout.on('data', on);
    child.stderr.on('data', on);
    child.once('exit', (c) => rej(new Error(`treegate exited ${c}:\n${out}`)));
  });
  const base = `http://127.0.0.1:${ports.http}`;
  const login = await (await fetch(`${base}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) })).json();
  const add = await (await fetch(`${base}/api/me/sshkey/add`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: login.data.token }, body: JSON.stringify({ title: 'bench', key: pubKey }) })).json();
  if (add.code !== 200) throw new Error(`sshkey/add: ${JSON.stringify(add)}`);
  // The folder both servers write small files into (see the small-puts case), mounted at /shared.
  const shared = await (await fetch(`${base}/api/admin/storage/create`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: login.data.token },
    body: JSON.stringify({ mount_path: '/shared', driver: 'Local', addition: JSON.stringify({ root_folder_path: join(work, 'shared') }) }),
  })).json();
  if (shared.code !== 200) throw new Error(`storage/create: ${JSON.stringify(shared)}`);
  return { name: 'treegate', pid: child.pid, port: ports.sftp, user: 'admin', root: '', disk: join(data, 'storage'), shared: '/shared' };
}

async function startSshd(work, pubKey) {
  const dir = join(work, 'sshd');
  const root = join(work, 'sshd-root');
  await mkdir(dir, { recursive: true });
  await mkdir(root, { recursive: true });
  await mkdir('/run/sshd', { recursive: true });
  spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'host_key')]);
  await writeFile(join(dir, 'authorized_keys'), pubKey + '\n', { mode: 0o600 });
  const port = await freePort();
  const cfg = join(dir, 'sshd_config');
  await writeFile(cfg, [
    `Port ${port}`, 'ListenAddress 127.0.0.1', `HostKey ${join(dir, 'host_key')}`, 'PidFile none',
    `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`, 'StrictModes no', 'UsePAM no', 'PasswordAuthentication no',
    'KbdInteractiveAuthentication no', 'PermitRootLogin prohibit-password', 'Subsystem sftp internal-sftp', '',
  ].join('\n'));
  const child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', cfg], { stdio: 'ignore' });
  children.push(child);
  await waitPort(port);
  return { name: 'openssh', pid: child.pid, port, user: process.env.USER || 'root', root, disk: root, shared: join(work, 'shared') };
}

/**
 * CPU seconds a server has used, its reaped children included (sshd's per-connection processes
 * are reaped by the listener, so they count once they exit). Unlike wall time, this barely moves
 * when other work shares the machine: a steadier figure of each server's own cost.
 */
function serverCpu(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  // Fields 14-17 of stat (utime, stime, cutime, cstime), counted from the state field (3) here.
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
}

function sftp(server, key, commands, cipher = CIPHERS[0]) {
  const batch = join(tmpdir(), `bench-batch-${process.pid}-${Math.random().toString(36).slice(2)}`);
  return (async () => {
    await writeFile(batch, commands.join('\n') + '\n');
    const t0 = process.hrtime.bigint();
    const r = spawnSync('sftp', ['-b', batch, '-P', String(server.port), '-c', cipher, '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
      '-o', 'IdentitiesOnly=yes', '-o', 'LogLevel=ERROR', '-i', key, `${server.user}@127.0.0.1`], { maxBuffer: 256 << 20, timeout: 900_000 });
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    await rm(batch, { force: true });
    if (r.status !== 0) throw new Error(`${server.name}: sftp failed (${r.status}): ${r.stderr?.toString().slice(0, 500)}`);
    return secs;
  })();
}

async function writeRandom(path, mib) {
  const out = createWriteStream(path);
  const block = randomBytes(1 << 20);
  for (let i = 0; i < mib; i++) {
    block.writeUInt32LE(i, 0); // not one repeated MiB, in case anything dedups
    if (!out.write(Buffer.from(block))) await new Promise((r) => out.once('drain', r));
  }
  await new Promise((r, j) => out.end((e) => (e ? j(e) : r())));
}

async function peakRssMiB(pid) {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)[1]) / 1024;
}

/** Reset the process's peak RSS (VmHWM) so the next read covers one case only; false where not allowed. */
async function resetPeakRss(pid) {
  try {
    await writeFile(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

async function main() {
  const cli = build();
  const work = await mkdtemp(join(tmpdir(), 'treegate-bench-sftp-'));
  cleanups.push(() => rm(work, { recursive: true, force: true }));
  const key = join(work, 'client_key');
  spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key]);
  const pub = (await readFile(key + '.pub', 'utf8')).trim();
  await mkdir(join(work, 'shared'));
  const servers = [await startTreegate(cli, work, pub), await startSshd(work, pub)];
  const big = join(work, 'big.bin');
  await writeRandom(big, SIZE_MIB);
  const small = join(work, 'small.bin');
  await writeFile(small, randomBytes(1024));
  for (const s of servers) {
    await mkdir(join(s.disk, 'many'), { recursive: true });
    for (let i = 0; i < FILES; i++) await writeFile(join(s.disk, 'many', `file-${String(i).padStart(5, '0')}.txt`), 'x');
  }
  const results = [];
  const measure = async (label, fn) => {
    if (!ONLY.test(label)) return;
    const row = { label };
    for (const s of servers) row[s.name] = Infinity;
    const perCase = await resetPeakRss(servers[0].pid);
    const cpu = {};
    for (const s of servers) cpu[s.name] = Infinity;
    for (let i = 0; i < REPEAT; i++) {
      // Every repeat swaps which server goes first, so drift hits both alike, and each run starts
      // with no dirty pages from the run or setup before: writeback of a 1 GiB file slows every
      // write for seconds and would fall on whichever server came next.
      for (const s of i % 2 ? [...servers].reverse() : servers) {
        spawnSync('sync');
        const c0 = serverCpu(s.pid);
        row[s.name] = Math.min(row[s.name], await fn(s));
        cpu[s.name] = Math.min(cpu[s.name], serverCpu(s.pid) - c0);
      }
    }
    results.push(row);
    const rss = perCase ? `   treegate peak RSS ${(await peakRssMiB(servers[0].pid)).toFixed(0)} MiB` : '';
    console.log(`${label.padEnd(36)} treegate ${row.treegate.toFixed(2)} s   openssh ${row.openssh.toFixed(2)} s   ratio ${(row.treegate / row.openssh).toFixed(2)}   server CPU ${cpu.treegate.toFixed(2)} s vs ${cpu.openssh.toFixed(2)} s${rss}`);
  };
  for (const cipher of CIPHERS) {
    const c = cipher.split('@')[0];
    await measure(`put ${SIZE_MIB} MiB (${c})`, (s) => sftp(s, key, [`put ${big} ${s.root}/big.bin`], cipher));
    await measure(`get ${SIZE_MIB} MiB (${c})`, (s) => sftp(s, key, [`get ${s.root}/big.bin /dev/null`], cipher));
  }
  await measure(`ls -l of ${FILES} files`, async (s) => {
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await sftp(s, key, [`ls -l ${s.root}/many`]));
    return Math.min(...runs);
  });
  // Each run uploads new files (into the same names, later runs measured overwriting instead), and
  // both servers write into the same folder: creating a file here costs 15 µs or 400 µs depending
  // on the ext4 block group its folder landed in, so separate folders measured that lottery.
  let smallRun = 0;
  await measure(`${SMALL} puts of 1 KiB (one session)`, async (s) => {
    const dir = `run-${Math.floor(smallRun++ / servers.length)}`;
    await mkdir(join(work, 'shared', dir), { recursive: true });
    return sftp(s, key, Array.from({ length: SMALL }, (_, i) => `put ${small} ${s.shared}/${dir}/${s.name}-f${i}`));
  });
  const baseline = await measure('connect + pwd (baseline)', async (s) => {
    const runs = [];
    for (let i = 0; i < 5; i++) runs.push(await sftp(s, key, ['pwd']));
    return Math.min(...runs);
  });
  void baseline;
  console.log(`\ntreegate peak RSS: ${(await peakRssMiB(servers[0].pid)).toFixed(0)} MiB (since the last case began where per-case figures are shown, else over the whole run)`);
  console.log('ratio = treegate time / OpenSSH time (lower is better; 1.00 = parity); server CPU = the fewest CPU seconds a run of the case cost the server (OpenSSH: sshd and its session processes)');
}

try {
  await main();
} finally {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  // Long enough for a --cpu-prof profile to be written on treegate's exit.
  await sleep(NODE_ARGS.length ? 5000 : 500);
  for (const f of cleanups) await f();
}
