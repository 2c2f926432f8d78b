/**
 * `treegate server` run from a terminal that then closes (README: SIGHUP stops it as SIGTERM does),
 * proven against the built CLI (dist/) run as a real process on loopback.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, cliEnv, tempDataDirs } from './clients/process.js';

const dataDirs = tempDataDirs('treegate-ops-review-');
const children: ChildProcess[] = [];
const pids: number[] = [];

/** Running and not a zombie (an orphan whose reaper is slow still counts as gone). */
function running(pid: number): boolean {
  try {
    return !/\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

async function waitFor(cond: () => boolean, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const pid of pids.splice(0)) if (running(pid)) process.kill(pid, 'SIGKILL');
  await dataDirs.cleanup();
});

/**
 * `treegate server` in a terminal (util-linux `script` gives it one), then the terminal closes: the
 * server gets SIGHUP and its stdout answers EIO from then on.
 */
async function serverInTerminalThenHangUp(env: NodeJS.ProcessEnv): Promise<{ pid: number; data: string }> {
  const data = await dataDirs.next();
  const cmd = `exec '${process.execPath}' '${CLI}' server --data '${data}'`;
  const term = spawn('script', ['-qfec', cmd, '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(term);
  let out = '';
  term.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  expect(await waitFor(() => out.includes('treegate ready: http://'), 30_000), out).toBe(true);
  const pid = (JSON.parse(readFileSync(join(data, 'server.pid'), 'utf8')) as { pid: number }).pid;
  pids.push(pid);
  term.kill('SIGKILL'); // the terminal window closes
  return { pid, data };
}

describe('SIGHUP: the terminal that ran `treegate server` closed (README: stops as SIGTERM does)', () => {
  it('the server stops and exits, leaving DATA free (it hung forever in the exit flush of its log)', async () => {
    const { pid, data } = await serverInTerminalThenHangUp(cliEnv());
    expect(await waitFor(() => !running(pid), 20_000)).toBe(true);
    expect(existsSync(join(data, 'server.pid'))).toBe(false);
  });

  it('also when the stop is over before the log was due to be written (no SFTP: a fast stop)', async () => {
    const { pid, data } = await serverInTerminalThenHangUp(cliEnv({ TREEGATE_SFTP_ENABLE: 'false' }));
    expect(await waitFor(() => !running(pid), 20_000)).toBe(true);
    expect(existsSync(join(data, 'server.pid'))).toBe(false);
  });
});
