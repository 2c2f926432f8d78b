/**
 * Run the built CLI (dist/, made by `npm test`'s pretest build) as a real child process, the way an
 * operator or systemd would, and wait for its ready line.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const CLI = resolve(import.meta.dirname, '../../dist/src/cli.js');

export interface ServerProcess {
  child: ChildProcess;
  http: number;
  sftp: number;
  output: () => string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

export function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    TREEGATE_HTTP_ADDRESS: '127.0.0.1',
    TREEGATE_HTTP_PORT: '0',
    TREEGATE_SFTP_PORT: '0',
    ...extra,
  };
}

/**
 * Start `treegate server ARGS` and wait (bounded) for the ready line with its ports. `launcher`: a
 * command the server is started through, node included (`['prlimit', '--nofile=256:256', '--', process.execPath]`, `[process.execPath, '--some-v8-flag']`).
 */
export async function startServerProcess(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 30_000, launcher: string[] = [process.execPath]): Promise<ServerProcess> {
  const [cmd, ...rest] = [...launcher, CLI, 'server', ...args];
  const child = spawn(cmd!, rest, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  const ready = new Promise<{ http: number; sftp: number }>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no ready line within ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const onData = (b: Buffer) => {
      out += b.toString();
      const m = /treegate ready: http:\/\/(?:\[[^\]]+\]|[^:]+):(\d+)(?: sftp:\/\/(?:\[[^\]]+\]|[^:]+):(\d+))?/.exec(out);
      if (m) {
        clearTimeout(timer);
        res({ http: Number(m[1]), sftp: Number(m[2] ?? 0) });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      rej(new Error(`server exited with ${code} before ready:\n${out}`));
    });
  });
  const ports = await ready;
  return { child, ...ports, output: () => out, exited };
}

/** Run a CLI command to completion. */
export function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((res) => {
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.once('exit', (code) => res({ code, stdout, stderr }));
  });
}

/** A TCP port that was free a moment ago (for config-precedence tests that must name a port). */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

/**
 * Data dirs for the tests of one file: each `next()` is `data` inside a new temp folder (not created,
 * as on a first start); `cleanup()` removes every folder handed out so far.
 */
export function tempDataDirs(prefix: string): { next(): Promise<string>; cleanup(): Promise<void> } {
  const made: string[] = [];
  return {
    async next() {
      const d = await mkdtemp(join(tmpdir(), prefix));
      made.push(d);
      return join(d, 'data');
    },
    async cleanup() {
      for (const d of made.splice(0)) await rm(d, { recursive: true, force: true });
    },
  };
}
