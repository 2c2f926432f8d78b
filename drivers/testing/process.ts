/**
 * Test-only helpers for driver tests that run a real server on loopback: a free port, a child
 * process bounded in time (GNU `timeout` kills it even if the test runner dies), waiting for its
 * port, and a TCP proxy that can cut every connection to simulate a server that goes away.
 * Nothing here is used by driver code.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import net from 'node:net';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Fail loudly (never skip) when a Debian tool is missing. */
export async function requireTool(path: string, pkg: string): Promise<void> {
  try {
    await access(path, constants.X_OK);
  } catch {
    throw new Error(`${path} is missing: apt-get install -y ${pkg}`);
  }
}

export async function waitForPort(port: number, ms: number, proc?: ChildProcess, output?: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (proc && proc.exitCode !== null) throw new Error(`server exited with ${proc.exitCode}: ${output?.() ?? ''}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true); });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`port ${port} not open after ${ms} ms: ${output?.() ?? ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface Server {
  readonly pid: number;
  output(): string;
  stop(): Promise<void>;
}

/** Start `cmd` under `timeout` (at most `maxSeconds`), wait for `port`, return a handle to stop it by PID. */
export async function startServer(cmd: string, args: string[], port: number, opts: { maxSeconds?: number; env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<Server> {
  const proc = spawn('timeout', ['-k', '5', String(opts.maxSeconds ?? 600), cmd, ...args], {
    env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (b: Buffer) => { out = (out + b.toString()).slice(-4000); };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM'); // `timeout` forwards it to the server
    const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(t);
  };
  try {
    await waitForPort(port, 15_000, proc, () => out);
  } catch (e) {
    await stop();
    throw e;
  }
  return { pid: proc.pid!, output: () => out, stop };
}

/** A WebDAV server started by a test (nginx's dav module, rclone serve webdav). */
export interface DavServer {
  port: number;
  url: string;
  user: string;
  password: string;
  /** The folder the server serves. */
  dataDir: string;
  server: Server;
  stop(): Promise<void>;
}

export interface CutProxy {
  readonly port: number;
  /** Destroy every open connection (new ones are still accepted). */
  cut(): void;
  close(): Promise<void>;
}

/**
 * A connection handler that pipes each client to 127.0.0.1:`target`, tracking both sockets in
 * `sockets` so a test can cut them; an error on either side closes both.
 */
export function proxyTo(target: number, sockets: Set<net.Socket>): (client: net.Socket) => void {
  return (client) => {
    const upstream = net.connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    client.pipe(upstream).pipe(client);
  };
}

/** A TCP proxy on loopback to `target`; `cut()` simulates the remote dropping us. */
export async function cutProxy(target: number): Promise<CutProxy> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer(proxyTo(target, sockets));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: () => { for (const s of sockets) s.destroy(); },
    close: () => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }),
  };
}

interface Initialisable {
  init(signal: AbortSignal): Promise<void>;
  drop(): Promise<void>;
}

/**
 * Run `init` against a server that accepts connections and never says a word, with a 300 ms signal:
 * what it failed with, as codeOf reports it. Only the signal can end the wait: an init that ignores
 * it is still waiting 10 s later, reported as 'IGNORED_ABORT' (a hang check with a wide margin, not
 * a speed measure).
 */
export async function initAgainstMuteServer(
  create: (port: number) => Initialisable | Promise<Initialisable>,
  codeOf: (p: Promise<unknown>) => Promise<string>,
): Promise<string> {
  const silent = net.createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  let timer: NodeJS.Timeout | undefined;
  try {
    const mute = await create((silent.address() as net.AddressInfo).port);
    const ignored = new Promise<string>((r) => (timer = setTimeout(() => r('IGNORED_ABORT'), 10_000)));
    const code = await Promise.race([codeOf(mute.init(AbortSignal.timeout(300))), ignored]);
    await mute.drop();
    return code;
  } finally {
    clearTimeout(timer);
    silent.close();
  }
}
