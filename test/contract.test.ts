/**
 * The runtime contract (../shared/docs/contract.md), checked against the built CLI as a real process:
 * first start, ready line, /ping, config precedence, CLI commands, graceful stop, file modes.
 */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliEnv, freePort, runCli, startServerProcess, tempDataDirs, type ServerProcess } from './clients/process.js';

const procs: ServerProcess[] = [];

const dataDirs = tempDataDirs('treegate-contract-');
const tempData = () => dataDirs.next();

async function stop(p: ServerProcess): Promise<number | null> {
  p.child.kill('SIGTERM');
  return p.exited;
}

async function login(port: number, username: string, password: string): Promise<{ code: number; message: string }> {
  const r = await fetch(`http://127.0.0.1:${port}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  return (await r.json()) as { code: number; message: string };
}

afterEach(async () => {
  for (const p of procs.splice(0)) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  await dataDirs.cleanup();
});

describe('first start and ready', () => {
  it('creates admin with a printed random password, serves /ping, stops cleanly on SIGTERM', async () => {
    const data = await tempData();
    const p = await startServerProcess(['--data', data], cliEnv());
    procs.push(p);
    const m = /initial password: (\S+)/.exec(p.output());
    expect(m, p.output()).toBeTruthy();
    const ping = await fetch(`http://127.0.0.1:${p.http}/ping`);
    expect(ping.status).toBe(200);
    expect(await ping.text()).toBe('pong');
    expect((await login(p.http, 'admin', m![1]!)).code).toBe(200);
    expect((await login(p.http, 'admin', 'wrong')).code).toBe(400);
    expect(p.sftp).toBeGreaterThan(0);

    // The data dir and its secrets are private to the service user.
    expect((await stat(data)).mode & 0o777).toBe(0o700);
    expect((await stat(join(data, 'store.json'))).mode & 0o777).toBe(0o600);
    expect((await stat(join(data, 'config.json'))).mode & 0o777).toBe(0o600);
    const cfg = JSON.parse(await readFile(join(data, 'config.json'), 'utf8'));
    expect(cfg.jwt_secret).toMatch(/.{20,}/);
    expect(cfg.http.port).toBe(5244); // defaults written, env overrides not persisted

    expect(await stop(p)).toBe(0);
    expect(p.output()).toContain('treegate stopped');
    // The store file holds no plain password.
    expect(await readFile(join(data, 'store.json'), 'utf8')).not.toContain(m![1]!);
  });

  it('takes the admin password from TREEGATE_ADMIN_PASSWORD and never prints it', async () => {
    const data = await tempData();
    const p = await startServerProcess(['--data', data], cliEnv({ TREEGATE_ADMIN_PASSWORD: 'from-env-Secret1' }));
    procs.push(p);
    expect(p.output()).not.toContain('from-env-Secret1');
    expect((await login(p.http, 'admin', 'from-env-Secret1')).code).toBe(200);
    expect(await stop(p)).toBe(0);
  });

  it('names IPv6 listeners as URLs in the ready line ([::1]:port)', async () => {
    const p = await startServerProcess(['--data', await tempData()], cliEnv({ TREEGATE_HTTP_ADDRESS: '::1' }));
    procs.push(p);
    const line = p.output().split('\n').find((l) => l.includes('treegate ready:'))!;
    expect(line).toContain(`treegate ready: http://[::1]:${p.http} sftp://[::1]:${p.sftp}`);
    const url = /http:\/\/\S+/.exec(JSON.parse(line).msg)![0];
    expect(await (await fetch(`${url}/ping`)).text()).toBe('pong');
    expect(await stop(p)).toBe(0);
  });

  it.each(['SIGINT', 'SIGHUP'] as const)('stops cleanly on %s too', async (signal) => {
    const p = await startServerProcess(['--data', await tempData()], cliEnv());
    procs.push(p);
    p.child.kill(signal);
    expect(await p.exited).toBe(0);
  });
});

describe('configuration precedence: flag > env > config file > default', () => {
  it('env beats the config file, and the config file beats the default', async () => {
    const data = await tempData();
    // First start writes DATA/config.json; then we edit it like an operator would.
    const first = await startServerProcess(['--data', data], cliEnv());
    procs.push(first);
    expect(await stop(first)).toBe(0);
    const filePort = await freePort();
    const cfgFile = join(data, 'config.json');
    const cfg = JSON.parse(await readFile(cfgFile, 'utf8'));
    cfg.http.port = filePort;
    cfg.sftp.enable = false;
    await writeFile(cfgFile, JSON.stringify(cfg));

    const env = cliEnv();
    delete env.TREEGATE_HTTP_PORT;
    const fromFile = await startServerProcess(['--data', data], env);
    procs.push(fromFile);
    expect(fromFile.http).toBe(filePort);
    expect(fromFile.sftp).toBe(0); // sftp.enable=false from the file
    expect(await stop(fromFile)).toBe(0);

    const envPort = await freePort();
    const fromEnv = await startServerProcess(['--data', data], { ...env, TREEGATE_HTTP_PORT: String(envPort) });
    procs.push(fromEnv);
    expect(fromEnv.http).toBe(envPort);
    expect(await stop(fromEnv)).toBe(0);
  });

  it('the --data flag beats TREEGATE_DATA, and --config picks another file', async () => {
    const flagData = await tempData();
    const envData = await tempData();
    const altPort = await freePort();
    const alt = join(flagData + '-alt.json');
    await writeFile(alt, JSON.stringify({ http: { port: altPort }, sftp: { enable: false } }));
    const env = cliEnv({ TREEGATE_DATA: envData });
    delete env.TREEGATE_HTTP_PORT;
    const p = await startServerProcess(['--data', flagData, '--config', alt], env);
    procs.push(p);
    expect(p.http).toBe(altPort);
    expect(await stop(p)).toBe(0);
    await expect(stat(join(flagData, 'store.json'))).resolves.toBeTruthy();
    await expect(stat(join(envData, 'store.json'))).rejects.toThrow();
  });

  it('refuses a config file of the wrong shape with a clear message', async () => {
    const data = await tempData();
    await mkdir(data, { recursive: true, mode: 0o700 });
    await writeFile(join(data, 'config.json'), JSON.stringify({ http: { port: 'eighty' } }));
    const r = await runCli(['server', '--data', data], cliEnv());
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('http.port');
    expect(r.stderr).not.toMatch(/at .*\.js:\d+/); // no stack trace
  });
});

describe('CLI', () => {
  it('prints the version and the help', async () => {
    const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8'));
    const v = await runCli(['version'], cliEnv());
    expect(v.code).toBe(0);
    expect(v.stdout.trim()).toBe(pkg.version);
    const h = await runCli(['--help'], cliEnv());
    expect(h.code).toBe(0);
    for (const c of ['server', 'admin show', 'admin set', 'admin random', 'version']) expect(h.stdout).toContain(c);
    const bad = await runCli(['frobnicate'], cliEnv());
    expect(bad.code).toBe(2);
  });

  it('admin show / set / random, and a running server picks up the change', async () => {
    const data = await tempData();
    const p = await startServerProcess(['--data', data], cliEnv({ TREEGATE_ADMIN_PASSWORD: 'first-Password1' }));
    procs.push(p);
    const show = await runCli(['admin', 'show', '--data', data], cliEnv());
    expect(show.code).toBe(0);
    expect(show.stdout).toContain('username: admin');
    expect(show.stdout).toContain('password set: yes');
    expect(show.stdout).not.toMatch(/scrypt|[0-9a-f]{64}/);

    expect((await runCli(['admin', 'set', 'second-Password2', '--data', data], cliEnv())).code).toBe(0);
    // The running server applied it before the command returned (the CLI hands it over: store/owner.ts).
    expect((await login(p.http, 'admin', 'second-Password2')).code).toBe(200);
    expect((await login(p.http, 'admin', 'first-Password1')).code).toBe(400);

    const rnd = await runCli(['admin', 'random', '--data', data], cliEnv());
    expect(rnd.code).toBe(0);
    const pw = /password: (\S+)/.exec(rnd.stdout)![1]!;
    expect((await login(p.http, 'admin', pw)).code).toBe(200);
    expect(await stop(p)).toBe(0);
  });
});
