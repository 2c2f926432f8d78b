/**
 * The SFTP listener: an ssh2 Server fed by our own net.Server (so every socket gets setNoDelay —
 * measured: without it ssh2 uploads at 0.2-0.5x OpenSSH — and the banner is read from the
 * `announcement` setting per connection). Only the `sftp` subsystem is served; shell, exec and
 * forwarding are refused with a message. Each authenticated connection gets one AccessContext
 * {principal, protocol:'sftp', ip} per SFTP channel.
 *
 * A login does not outlive its user's rights: after every users change (Accounts.onUsersChange: the
 * admin API, /api/me, `treegate admin set` seen as an external store change) each live connection
 * re-reads its user (and the key it logged in with) once (one store read per connection per change,
 * none per request) and either goes on with the new principal or, when recheckLogin says the login
 * no longer stands (deleted, disabled, SFTP bit gone, password changed, key deleted), has its
 * channels torn down and is disconnected.
 */
import { mkdir, readdir, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import type { Connection, ServerChannel, ServerConfig, Session } from 'ssh2';
import type { Core } from '../../src/core.js';
import type { AccessContext, Principal } from '../../src/auth/principal.js';
import { VfsError } from '../../src/errors.js';
import { ipKey } from '../../src/auth/throttle.js';
import { recheckLogin, SftpAuth } from './auth.js';
import { loadHostKeys } from './hostkeys.js';
import { attachPacketArena } from './packet-arena.js';
import { withReusedReads, type ReusedReads } from './reused-reads.js';
import { SftpSession } from './session.js';
import { SharedWrites } from './write-gate.js';

const { Server } = ssh2;

export interface SftpListener {
  address: string;
  port: number;
  /** SFTP channels open now, over all connections. */
  channels(): number;
  close(): Promise<void>;
}

/** Fast AEAD ciphers first (aes-gcm is ~1.6x chacha20 here); CTR for clients without either. */
const ALGORITHMS: ServerConfig['algorithms'] = {
  kex: ['curve25519-sha256', 'curve25519-sha256@libssh.org', 'ecdh-sha2-nistp256', 'ecdh-sha2-nistp384', 'ecdh-sha2-nistp521', 'diffie-hellman-group-exchange-sha256', 'diffie-hellman-group14-sha256', 'diffie-hellman-group16-sha512'],
  cipher: ['aes128-gcm@openssh.com', 'chacha20-poly1305@openssh.com', 'aes256-gcm@openssh.com', 'aes128-ctr', 'aes192-ctr', 'aes256-ctr'],
  hmac: ['hmac-sha2-256-etm@openssh.com', 'hmac-sha2-512-etm@openssh.com', 'hmac-sha2-256', 'hmac-sha2-512', 'hmac-sha1'],
  compress: ['none'],
};
const ONLY_SFTP = 'This service allows SFTP connections only.\r\n';
/** Unauthenticated connections get at most this long (or the idle timeout, if shorter). */
const LOGIN_GRACE_MS = 120_000;
/**
 * Connections not logged in yet, per client address (counted as the login throttle counts them) and
 * in all, as OpenSSH's MaxStartups: past either, a new connection is closed at once. Each holds a
 * socket and its 256 KiB read buffer. Room for clients that log in many connections at once (rclone
 * with --transfers 32, the race probe's 20 parallel clients).
 */
export const MAX_STARTUPS_PER_IP = 64;
export const MAX_STARTUPS = 1024;
/** SFTP channels open at once on one connection (OpenSSH's MaxSessions is 10). */
export const MAX_CHANNELS = 16;
/** Logged-in connections of one user at once (each holds buffers of its own: a read buffer, per-channel pools). */
export const MAX_CONNECTIONS_PER_USER = 64;
/** How long close() lets connections end before destroying their sockets. */
const CLOSE_GRACE_MS = 3_000;

function bannerOf(core: Core): string | undefined {
  const text = core.settings.get('announcement').trim();
  return text ? text.replace(/\r?\n/g, '\r\n') + '\r\n' : undefined;
}

/** Temp files a crashed previous run left behind (graceful runs remove their own). */
async function cleanTmp(tmpDir: string): Promise<void> {
  await mkdir(tmpDir, { recursive: true, mode: 0o700 });
  for (const name of await readdir(tmpDir)) if (name.startsWith('sftp-')) await rm(join(tmpDir, name), { force: true });
}

/**
 * Coalesce the socket writes of one tick: ssh2 writes every SSH packet separately (and the socket is
 * NoDelay), so a 255 KiB DATA reply was 8 write syscalls. Corked until the tick's replies are out.
 */
function batcher(socket: Socket): () => void {
  let corked = false;
  const flush = () => {
    corked = false;
    socket.uncork();
  };
  return () => {
    if (corked || socket.destroyed) return;
    corked = true;
    socket.cork();
    process.nextTick(flush);
  };
}

/** Whether ssh2 loaded its compiled crypto (node-gyp at install); it falls back to slower code. */
function sshCryptoBinding(): boolean {
  try {
    return (createRequire(import.meta.url)('ssh2/lib/protocol/crypto.js') as { bindingAvailable?: boolean }).bindingAvailable === true;
  } catch {
    return false;
  }
}

/** A refused channel request still tells a person at a terminal why. */
function refuseChannel(accept: () => ServerChannel): void {
  const ch = accept();
  ch.stderr.write(ONLY_SFTP);
  ch.exit(1);
  ch.end();
}

export async function startSftpServer(core: Core): Promise<SftpListener> {
  const { config, log: baseLog } = core;
  const log = baseLog.child({ component: 'sftp' });
  const tmpDir = join(config.dataDir, 'tmp');
  const stopping = new AbortController();
  const [hostKeys] = await Promise.all([loadHostKeys(config.dataDir, log, stopping.signal), cleanTmp(tmpDir)]);
  const idleMs = Math.max(1, config.sftp.idle_timeout) * 1000;
  const cfg: ServerConfig = { hostKeys: hostKeys.initial, ident: `treegate_${core.version}`, algorithms: ALGORITHMS, keepaliveInterval: 30_000, keepaliveCountMax: 4 };
  const sockets = new Set<Socket>();
  /** Each connection's open SFTP sessions (one per channel). */
  const connections = new Set<Set<SftpSession>>();
  /** Live sockets (and their read buffers) by remote address:port: how onClient, given only ssh2's info, finds them. */
  const byPeer = new Map<string, { socket: Socket; reads?: ReusedReads; loggedIn(): void }>();
  /** Connections not logged in yet, by ipKey, and their number (MAX_STARTUPS). */
  const startups = new Map<string, number>();
  let startupsTotal = 0;
  const peerKey = (ip: string | undefined, port: number | undefined) => `${ip}|${port}`;
  /** Logged-in connections: each re-reads its user after a users change. */
  const logins = new Set<{ recheck(): void }>();
  /** Paths open for an exclusive create, across all sessions (SessionDeps.exclusive). */
  const exclusive = new Set<string>();
  /** Out-of-order WRITE bytes held by all uploads (SessionDeps.reorder). */
  const reorder = { held: 0 };
  /** WRITE bytes not answered yet, over all channels (write-gate.ts SharedWrites). */
  const writes = new SharedWrites();
  /**
   * Per user id: open handles and the entries dir handles hold (handles.ts MAX_HANDLES_PER_USER,
   * MAX_DIR_ENTRIES_PER_USER), and logged-in connections.
   */
  const userHandles = new Map<number, number>();
  const userDirEntries = new Map<number, number>();
  const userConnections = new Map<number, number>();
  const unsubscribe = core.accounts.onUsersChange(() => {
    for (const l of logins) l.recheck();
  });

  const onClient = (client: Connection, ip: string, port: number | undefined) => {
    const { socket, reads, loggedIn } = byPeer.get(peerKey(ip, port)) ?? {};
    const batch = socket ? batcher(socket) : undefined;
    if (socket && !attachPacketArena(client, socket)) log.debug('ssh2 internals differ: outgoing packets use ordinary buffers');
    if (reads && !reads.attach(client)) log.debug('ssh2 internals differ: socket reads are copied');
    let closed = false;
    client.once('close', () => (closed = true));
    const auth = new SftpAuth({ store: core.store, accounts: core.accounts, log }, ip, () => closed, (hard) => (hard && socket ? socket.destroy() : client.end()));
    const sessions = new Set<SftpSession>();
    connections.add(sessions);
    // One timer per connection: reset by auth steps and SFTP requests; an idle session is closed.
    const timer = setTimeout(() => {
      log.info({ ip, user: auth.principal?.username }, 'sftp connection idle, closing');
      client.end();
    }, Math.min(idleMs, LOGIN_GRACE_MS));
    timer.unref();
    const touch = () => timer.refresh();

    client.on('authentication', (a) => {
      touch();
      auth.handle(a);
    });
    client.on('ready', () => {
      let principal: Principal = auth.principal!;
      const loginUser = auth.user!;
      let revoked = false;
      /** Numbers the re-reads, so a slow one cannot overwrite the answer of a later one. */
      let rereads = 0;
      const revoke = (reason: string) => {
        if (revoked) return;
        revoked = true;
        log.info({ ip, user: loginUser.username, reason }, 'sftp login revoked, closing the connection');
        for (const s of sessions) s.teardown(true);
        client.end();
        // end() only half-closes: a client that never closed its side kept the connection (its
        // buffers, and its place among the user's MAX_CONNECTIONS_PER_USER, so a password changed
        // after a theft locked the user out) for as long as it liked.
        const force = setTimeout(() => socket?.destroy(), CLOSE_GRACE_MS);
        force.unref();
        client.once('close', () => clearTimeout(force));
      };
      const login = {
        recheck: () => {
          const n = ++rereads;
          const keyId = auth.keyId;
          Promise.all([core.accounts.byId(loginUser.id), keyId === undefined || core.store.sshKeys.get(keyId).then(Boolean)]).then(
            ([now, keyKept]) => {
              if (n !== rereads || revoked) return;
              const v = recheckLogin(loginUser, now, keyKept);
              if ('reason' in v) revoke(v.reason);
              else principal = v.principal;
            },
            (err: unknown) => {
              log.error({ err, ip, user: loginUser.username }, 'sftp: re-reading the user failed');
              revoke('user lookup failed');
            },
          );
        },
      };
      const held = userConnections.get(loginUser.id) ?? 0;
      if (held >= MAX_CONNECTIONS_PER_USER) {
        log.info({ ip, user: loginUser.username }, `sftp: more than ${MAX_CONNECTIONS_PER_USER} connections of this user, closing`);
        return void client.end();
      }
      userConnections.set(loginUser.id, held + 1);
      client.on('close', () => {
        const n = (userConnections.get(loginUser.id) ?? 1) - 1;
        if (n > 0) userConnections.set(loginUser.id, n);
        else userConnections.delete(loginUser.id);
      });
      logins.add(login);
      // The record the login was judged on was read before the password check (scrypt, tens of ms)
      // or the key's last_used_time write: a user disabled, deleted or changed meanwhile told no one
      // of this connection, which then went on as if nothing had changed. Judge it again now.
      login.recheck();
      loggedIn?.();
      client.on('close', () => logins.delete(login));
      // After login the idle timeout proper applies.
      clearTimeout(timer);
      const idle = setTimeout(() => {
        // A client waiting for an answer is not idle: a request on a slow storage, or an upload's
        // CLOSE landing, used to be cut off (and that upload lost) once it outlasted the timeout.
        if ([...sessions].some((s) => s.busy)) return void idle.refresh();
        log.info({ ip, user: principal.username }, 'sftp connection idle, closing');
        client.end();
      }, idleMs);
      idle.unref();
      const touchIdle = () => idle.refresh();
      client.on('close', () => clearTimeout(idle));
      client.on('session', (acceptSession) => {
        const session: Session = acceptSession();
        session.on('sftp', (accept, reject) => {
          if (revoked || sessions.size >= MAX_CHANNELS) return reject();
          touchIdle();
          // One AccessContext per channel: its signal stops that channel's VFS calls when it ends.
          // SftpSession keeps this object and the VFS reads ctx.principal on every call, so a getter
          // hands each request the connection's current principal (replaced after a users change)
          // with no copy to keep in step. Once revoked there is none: it throws FORBIDDEN, which the
          // session answers as PERMISSION_DENIED to anything that arrives before the socket is gone.
          const abort = new AbortController();
          const ctx: AccessContext = {
            get principal(): Principal {
              if (revoked) throw new VfsError('FORBIDDEN', 'login revoked');
              return principal;
            },
            protocol: 'sftp',
            ip,
            signal: abort.signal,
          };
          const channel = accept();
          const s = new SftpSession(channel, { vfs: core.vfs, ctx, abort, tmpDir, log, touch: touchIdle, batch, stable: reads && ((b) => reads.stable(b)), exclusive, reorder, userHandles, userDirEntries, writes });
          sessions.add(s);
          // One connection may carry thousands of channels (OpenSSH ControlMaster: one per `sftp` run).
          channel.once('close', () => sessions.delete(s));
        });
        session.on('shell', (accept) => refuseChannel(accept));
        session.on('exec', (accept) => refuseChannel(accept));
        session.on('subsystem', (_accept, reject) => reject());
        // Accepted (it is only a flag) so `ssh host` reaches the shell refusal and shows its message.
        session.on('pty', (accept) => accept?.());
        session.on('x11', (_accept, reject) => reject?.());
        session.on('auth-agent', (_accept, reject) => reject?.());
        session.on('env', (_accept, reject) => reject?.());
        session.on('signal', (_accept, reject) => reject?.());
      });
      client.on('tcpip', (_accept, reject) => reject());
      client.on('openssh.streamlocal', (_accept, reject) => reject());
      client.on('request', (_accept, reject) => reject?.());
    });
    client.on('error', (err) => log.debug({ err, ip }, 'sftp connection error'));
    client.on('close', () => {
      clearTimeout(timer);
      connections.delete(sessions);
      for (const s of sessions) s.teardown();
    });
  };

  const makeSsh = (keys: Buffer[]) => {
    const conf: ServerConfig = { ...cfg, hostKeys: keys };
    const srv = new Server(conf, (client: Connection, info: { ip: string; port?: number }) => onClient(client, info.ip, info.port));
    srv.on('error', (err: Error) => log.warn({ err }, 'sftp server error'));
    return { srv, conf };
  };
  let ssh = makeSsh(hostKeys.initial);
  // A first start generates the RSA key in the background; new connections get it once it exists.
  void hostKeys.complete?.then(
    (all) => void (ssh = makeSsh(all)),
    (err: unknown) => {
      if (!stopping.signal.aborted) log.error({ err }, 'generating the RSA host key failed; serving ed25519 only');
    },
  );
  /** Resolved when the last socket has closed (the net server no longer counts them: reused-reads.ts). */
  let allClosed: (() => void) | undefined;
  // Paused: withReusedReads moves the connection to a socket reading into a reused buffer.
  const tcp = createServer({ pauseOnConnect: true }, (accepted) => {
    const ipk = ipKey(accepted.remoteAddress ?? '');
    if (startupsTotal >= MAX_STARTUPS || (startups.get(ipk) ?? 0) >= MAX_STARTUPS_PER_IP) return void accepted.destroy();
    const peer = withReusedReads(accepted);
    const { socket } = peer;
    socket.setNoDelay(true);
    sockets.add(socket);
    // Counted until it logs in, and cut off at the login grace counted from here: ssh2 reports a
    // connection (onClient, which has its own timer) only once the client's ident line arrived, so one
    // that sent nothing was kept for good.
    startupsTotal++;
    startups.set(ipk, (startups.get(ipk) ?? 0) + 1);
    const grace = setTimeout(() => socket.destroy(), Math.min(idleMs, LOGIN_GRACE_MS));
    grace.unref();
    let counted = true;
    const loggedIn = () => {
      if (!counted) return;
      counted = false;
      clearTimeout(grace);
      startupsTotal--;
      const n = (startups.get(ipk) ?? 1) - 1;
      if (n > 0) startups.set(ipk, n);
      else startups.delete(ipk);
    };
    const key = peerKey(socket.remoteAddress, socket.remotePort);
    byPeer.set(key, { ...peer, loggedIn });
    socket.once('close', () => {
      loggedIn();
      sockets.delete(socket);
      if (byPeer.get(key)?.socket === socket) byPeer.delete(key);
      if (sockets.size === 0) allClosed?.();
    });
    // ssh2 reads the banner from this config object when the socket is injected.
    ssh.conf.banner = bannerOf(core);
    ssh.srv.injectSocket(socket);
  });
  await new Promise<void>((resolve, reject) => {
    tcp.once('error', reject);
    tcp.listen({ host: config.sftp.address, port: config.sftp.port }, () => {
      tcp.off('error', reject);
      resolve();
    });
  });
  const addr = tcp.address() as AddressInfo;
  log.info({ address: addr.address, port: addr.port }, 'sftp listening');
  if (!sshCryptoBinding()) log.warn('ssh2 runs without its native crypto binding (npm ci could not build it): transfers are slower');

  return {
    address: addr.address,
    port: addr.port,
    channels: () => [...connections].reduce((n, c) => n + c.size, 0),
    close: async () => {
      unsubscribe();
      const listening = new Promise<void>((resolve) => tcp.close(() => resolve()));
      const closed = sockets.size ? new Promise<void>((resolve) => (allClosed = resolve)) : Promise.resolve();
      for (const s of sockets) s.end();
      const force = setTimeout(() => {
        for (const s of sockets) s.destroy();
      }, CLOSE_GRACE_MS);
      force.unref();
      // A host key still being generated is not written after close (the data dir may go next):
      // abort it, and wait for a write already under way, so nothing touches DATA once we return.
      stopping.abort();
      await hostKeys.complete?.catch(() => undefined);
      await Promise.all([listening, closed]);
      clearTimeout(force);
    },
  };
}
