/**
 * Start-up of the built CLI (dist/) as a real process, beyond contract.test.ts: `--help` anywhere has
 * no side effects, the contract's lines come out at any log.level, a refused config value stops
 * everything before the first start, and a SIGTERM during start-up is a clean stop.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, cliEnv, tempDataDirs } from './clients/process.js';

const children: ChildProcess[] = [];

const dataDirs = tempDataDirs('treegate-startup-');
const tempData = () => dataDirs.next();

interface Launched {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Both streams, in arrival order. */
  output: () => string;
  exited: Promise<number | null>;
}

/** Run the built CLI; every child is killed after each test, so a failing test leaves no server behind. */
function launch(args: string[], env: NodeJS.ProcessEnv, nodeArgs: string[] = []): Launched {
  const child = spawn(process.execPath, [...nodeArgs, CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  let all = '';
  child.stdout!.on('data', (b: Buffer) => ((out += b.toString()), (all += b.toString())));
  child.stderr!.on('data', (b: Buffer) => ((err += b.toString()), (all += b.toString())));
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  return { child, stdout: () => out, stderr: () => err, output: () => all, exited };
}

/** The exit code, or a failure if the command is still running after `ms` (it started a server). */
async function exitCode(l: Launched, ms = 20_000): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, rej) => (timer = setTimeout(() => rej(new Error(`still running after ${ms} ms:\n${l.output()}`)), ms)));
  try {
    return await Promise.race([l.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function waitFor(cond: () => boolean, what: () => string, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`condition not met in time:\n${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await dataDirs.cleanup();
});

describe('start-up', () => {
  it('--help or -h anywhere prints the help and does nothing else', async () => {
    const data = await tempData();
    for (const args of [['server', '--help'], ['server', '--data', data, '-h'], ['admin', 'set', 'pw', '--help'], ['admin', 'random', '-h'], ['server', '--bogus', '--help']]) {
      const r = launch([...args, '--data', data], cliEnv());
      expect(await exitCode(r), args.join(' ')).toBe(0);
      expect(r.stdout()).toContain('treegate server [--data DIR]');
      expect(r.stdout()).not.toMatch(/initial password|password: /);
      await expect(stat(data)).rejects.toThrow(/ENOENT/); // nothing started, nothing created
    }
  });

  it('the ready line and the first-start password come out at any log.level', async () => {
    for (const level of ['warn', 'silent']) {
      const p = launch(['server', '--data', await tempData()], cliEnv({ TREEGATE_LOG_LEVEL: level }));
      await waitFor(() => p.stdout().includes('treegate ready: http://'), p.output);
      expect(p.stdout()).toMatch(/"level":30,.*"msg":"created user admin; initial password: \S+/);
      expect(p.stdout()).not.toContain('mounted a Local storage'); // other info lines stay quiet
      p.child.kill('SIGTERM');
      expect(await exitCode(p)).toBe(0);
    }
  });

  it('a refused config value stops before the first start: one stderr line, nothing created', async () => {
    const data = await tempData();
    for (const [k, v, msg] of [
      ['TREEGATE_HTTP_PORT', '70000', 'treegate: http.port (from TREEGATE_HTTP_PORT): must be 0-65535, got 70000'],
      ['TREEGATE_LOG_LEVEL', 'loud', 'treegate: log.level (from TREEGATE_LOG_LEVEL): must be one of'],
      ['TREEGATE_TOKEN_EXPIRES_IN', '-5', 'treegate: token_expires_in (from TREEGATE_TOKEN_EXPIRES_IN): must be a positive number'],
      ['TREEGATE_DATABASE', 'postgres://u:pw@db/x', 'treegate: database (from TREEGATE_DATABASE): only the embedded file store'],
    ]) {
      const r = launch(['server', '--data', data], cliEnv({ [k!]: v! }));
      expect(await exitCode(r), r.output()).toBe(1);
      expect(r.stderr().trim().split('\n')).toHaveLength(1);
      expect(r.stderr()).toContain(msg);
      expect(r.stdout()).toBe(''); // no password printed
      await expect(stat(data)).rejects.toThrow(/ENOENT/);
    }
  });

  it('a SIGTERM during start-up (while the server module loads) stops it cleanly once started', async () => {
    const hook = new URL('./fixtures/slow-server-import.mjs', import.meta.url).pathname;
    const p = launch(['server', '--data', await tempData()], cliEnv(), ['--import', hook]);
    await waitFor(() => p.output().includes('test hook: importing server.js'), p.output);
    p.child.kill('SIGTERM');
    expect(await exitCode(p), p.output()).toBe(0);
    expect(p.output()).toContain('treegate ready');
    expect(p.output()).toContain('treegate stopped');
  });
});
