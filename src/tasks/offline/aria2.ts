/**
 * aria2 over JSON-RPC (alist-compat §12): settings aria2_uri and aria2_secret, 4 s per call. Init
 * asks getVersion; a download is addUri with `dir` = the task's temp folder, then tellStatus is
 * polled. When a download finishes with `followedBy` GIDs (a .torrent, metalink or magnet fetched
 * first), the task follows them. Every run adds the URL anew (downloads do not resume).
 *
 * A download larger than offline_download_max_size (its jobs together: a metalink's files run side
 * by side) fails as soon as aria2 knows the length (no preallocation: file-allocation=none).
 * Torrents do not seed (seed-time=0) and their .torrent is kept in memory; when the job completes,
 * only the files aria2 lists for it (getFiles) are kept in the folder (no `.aria2` control file).
 * Whatever the outcome, the job and its download result are removed from aria2.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readdir, rm, rmdir } from 'node:fs/promises';
import { join as hostJoin, resolve as hostResolve } from 'node:path';
import type { Settings } from '../../settings/settings.js';
import { sleep, type DownloadJob, type OfflineTool } from './tool.js';

interface Aria2Status {
  gid: string;
  status: string;
  totalLength?: string;
  completedLength?: string;
  followedBy?: string[];
  errorMessage?: string;
  errorCode?: string;
  seeder?: string;
}

interface Aria2File {
  path: string;
  selected: string;
}

const RPC_MS = 4000;
const STATUS_KEYS = ['gid', 'status', 'totalLength', 'completedLength', 'followedBy', 'errorMessage', 'errorCode', 'seeder'];
/**
 * Options of every job (inherited by the jobs it is followed by). pause and pause-metadata: an
 * aria2 whose own configuration adds downloads paused (or pauses those a torrent, metalink or
 * magnet spawns) left the task waiting for a paused job for good.
 */
const JOB_OPTIONS = { 'file-allocation': 'none', 'seed-time': '0', 'follow-torrent': 'mem', 'follow-metalink': 'mem', pause: 'false', 'pause-metadata': 'false' };

class Aria2Timeout extends Error {}

/**
 * Whether a URL's host is this machine: a loopback name or address, or an unspecified one
 * (0.0.0.0, ::), which a connection takes for this machine too.
 */
export function isLoopbackUrl(text: string): boolean {
  let host: string;
  try {
    host = new URL(text).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  } catch {
    return false;
  }
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || host === '::' || /^(127\.\d+\.\d+\.\d+|0\.0\.0\.0)$/.test(host);
}

/** Remove every file under `dir` that is not in `keep` (absolute paths), then the folders left empty. */
export async function keepOnly(dir: string, keep: ReadonlySet<string>): Promise<void> {
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = hostJoin(dir, e.name);
    if (e.isDirectory()) {
      await keepOnly(p, keep);
      await rmdir(p).catch(() => undefined); // only when empty
    } else if (!keep.has(hostResolve(p))) {
      await rm(p, { force: true });
    }
  }
}

export class Aria2Tool implements OfflineTool {
  readonly name = 'aria2';
  readonly schemes = ['http:', 'https:', 'ftp:', 'sftp:', 'magnet:'];
  readonly followsRedirects = true;
  private version = '';

  constructor(
    private readonly settings: Settings,
    private readonly pollMs = 1000,
    private readonly maxBytes: () => number = () => 0,
    /** The egress proxy's URL (egress-proxy.ts), for an aria2 on this machine. */
    private readonly proxyUrl?: () => Promise<string>,
  ) {}

  ready(): boolean {
    return this.version !== '';
  }

  private async rpc<T>(method: string, params: unknown[], signal?: AbortSignal): Promise<T> {
    const secret = this.settings.get('aria2_secret');
    const body = { jsonrpc: '2.0', id: randomUUID(), method, params: secret ? [`token:${secret}`, ...params] : params };
    const timeout = AbortSignal.timeout(RPC_MS);
    const failed = (e: unknown): never => {
      if (timeout.aborted && !signal?.aborted) throw new Aria2Timeout(`aria2 did not answer ${method} within ${RPC_MS / 1000} s`);
      // fetch's own message is only "fetch failed"; the reason (ECONNREFUSED...) is its cause.
      const cause = (e as { cause?: { message?: string } }).cause?.message;
      throw new Error(cause ? `${(e as Error).message}: ${cause}` : (e as Error).message);
    };
    const { url, auth } = endpointOf(this.settings.get('aria2_uri'));
    const res = await fetch(url, {
      method: 'POST', headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) }, body: JSON.stringify(body),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    }).catch(failed);
    const text = await res.text().catch(failed);
    let json: { result?: T; error?: { message?: string } } = {};
    try {
      json = JSON.parse(text) as typeof json;
    } catch {
      /* not JSON: judged by the status below */
    }
    if (json.error) throw new Error(json.error.message ?? 'aria2 error');
    if (!res.ok) throw new Error(`aria2 answered HTTP ${res.status}`);
    return json.result as T;
  }

  async init(): Promise<string> {
    this.version = '';
    const r = await this.rpc<{ version: string }>('aria2.getVersion', []);
    this.version = r.version;
    return r.version;
  }

  /** tellStatus; a timeout is retried once so that aria2's own error, when it has one, is what is reported. */
  private async status(gid: string, signal: AbortSignal): Promise<Aria2Status> {
    try {
      return await this.rpc<Aria2Status>('aria2.tellStatus', [gid, STATUS_KEYS], signal);
    } catch (e) {
      if (!(e instanceof Aria2Timeout)) throw e;
      return this.rpc<Aria2Status>('aria2.tellStatus', [gid, STATUS_KEYS], signal).catch(() => Promise.reject(e));
    }
  }

  /**
   * Options of a job: its folder, JOB_OPTIONS, and for an aria2 on this machine the egress proxy
   * for http and https (the SSRF rule checked at each connection, egress-proxy.ts). An aria2
   * elsewhere cannot reach a proxy on loopback: its connections are checked only as URLs (ssrf.ts).
   */
  private async jobOptions(dir: string): Promise<Record<string, string>> {
    const options: Record<string, string> = { dir, ...JOB_OPTIONS };
    if (this.proxyUrl && isLoopbackUrl(this.settings.get('aria2_uri'))) {
      const proxy = await this.proxyUrl();
      // no-proxy emptied: aria2's own list (its aria2.conf) would send those hosts around the check.
      Object.assign(options, { 'http-proxy': proxy, 'https-proxy': proxy, 'no-proxy': '' });
    }
    return options;
  }

  async download(job: DownloadJob): Promise<void> {
    // The gid is ours, recorded before addUri: a cancel or stop while aria2 answers it (the job
    // added, its gid not yet known here) still finds the job to drop.
    const first = randomBytes(8).toString('hex');
    const all = [first];
    // Every gid is kept, not only the current one: after a crash, forget() must drop them all.
    job.patch({ gid: first, gids: [first] });
    const stop = () => void this.drop(all);
    job.signal.addEventListener('abort', stop, { once: true });
    try {
      await this.rpc<string>('aria2.addUri', [[job.url.href], { ...(await this.jobOptions(job.dir)), gid: first }], job.signal);
      const pending = [first];
      const leaves: string[] = [];
      /** Bytes of each job holding files (not a followed .torrent or metalink): the limit is on their sum. */
      const sizes = new Map<string, number>();
      const sizeOf = (s: Aria2Status) => Math.max(Number(s.totalLength ?? 0), Number(s.completedLength ?? 0));
      while (pending.length > 0) {
        const gid = pending[0]!;
        const s = await this.status(gid, job.signal);
        const total = Number(s.totalLength ?? 0);
        const done = Number(s.completedLength ?? 0);
        job.report(`aria2: ${s.status}`, total > 0 ? (done * 100) / total : 0, total || undefined);
        const max = this.maxBytes();
        sizes.set(gid, sizeOf(s));
        // The jobs waiting their turn here run in aria2 meanwhile (a metalink's files side by
        // side): watching only the first let the others grow past the limit unseen.
        if (max > 0) for (const g of pending.slice(1)) sizes.set(g, sizeOf(await this.status(g, job.signal)));
        if (max > 0 && [...sizes.values()].reduce((a, b) => a + b, 0) > max) throw new Error(`the file is larger than the offline download limit of ${max} bytes`);
        // A torrent that is seeding has all its bytes: AList counts it as complete.
        const seeding = s.status === 'active' && s.seeder === 'true' && total > 0 && done === total;
        if (s.status === 'complete' || seeding) {
          pending.shift();
          const next = s.followedBy ?? [];
          if (next.length === 0) leaves.push(gid);
          else sizes.delete(gid); // the .torrent or metalink itself, kept in memory
          // the real downloads behind a torrent/metalink/magnet
          for (const g of next) if (!all.includes(g)) (pending.push(g), all.push(g));
          if (next.length) job.patch({ gid: next[0], gids: [...all] });
          continue;
        }
        if (s.status === 'error') throw new Error(`aria2: ${s.errorMessage || `error code ${s.errorCode ?? '?'}`}`);
        if (s.status === 'removed') throw new Error('aria2: download removed');
        await sleep(this.pollMs, job.signal);
      }
      const keep = new Set<string>();
      for (const gid of leaves) {
        for (const f of await this.rpc<Aria2File[]>('aria2.getFiles', [gid], job.signal)) {
          if (f.selected === 'true' && f.path && !f.path.startsWith('[')) keep.add(hostResolve(job.dir, f.path));
        }
      }
      await this.drop(all);
      await keepOnly(job.dir, keep);
    } catch (e) {
      await this.drop(all);
      throw e;
    } finally {
      job.signal.removeEventListener('abort', stop);
    }
  }

  /**
   * Best effort: stop the jobs, wait (bounded) until aria2 let go of their files, and remove their
   * download results, so that nothing is left running, seeding or listed in aria2.
   */
  private async drop(gids: readonly string[]): Promise<void> {
    await Promise.all(gids.map(async (gid) => {
      await this.rpc('aria2.forceRemove', [gid]).catch(() => undefined);
      for (let i = 0; i < 30; i++) {
        const s = await this.rpc<Aria2Status>('aria2.tellStatus', [gid, ['status']]).catch(() => undefined);
        if (!s || !['active', 'waiting', 'paused'].includes(s.status)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await this.rpc('aria2.removeDownloadResult', [gid]).catch(() => undefined);
    }));
  }

  /**
   * Drop every job of the task: the gids it recorded and, followed through aria2's `followedBy`,
   * the jobs a metalink or torrent spawned (also those spawned after the gids were last recorded,
   * e.g. while the server was down).
   */
  async forget(_id: string, args: Record<string, unknown>): Promise<void> {
    const known = [...(Array.isArray(args.gids) ? args.gids : []), args.gid].filter((g): g is string => typeof g === 'string' && g !== '');
    const all = [...new Set(known)];
    for (let i = 0; i < all.length && all.length < 1000; i++) {
      const s = await this.rpc<Aria2Status>('aria2.tellStatus', [all[i], ['followedBy']]).catch(() => undefined);
      for (const g of s?.followedBy ?? []) if (!all.includes(g)) all.push(g);
    }
    await this.drop(all).catch(() => undefined);
  }
}

/**
 * The RPC address without credentials, and those as a Basic header (a proxy in front of aria2 may
 * want them). fetch refuses a URL with credentials, naming the whole URL, password included, in its
 * error: that text went to the admin's reply, the log and (through add_offline_download) any user.
 */
export function endpointOf(uri: string): { url: string; auth?: string } {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    // fetch's error would quote the text whole ("Failed to parse URL from http://user:pass@[host..."),
    // a password in it included, into the reply and the log: say what is wrong without it.
    throw new Error('aria2_uri is not a valid URL');
  }
  if (!u.username && !u.password) return { url: uri };
  const auth = 'Basic ' + Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64');
  u.username = '';
  u.password = '';
  return { url: u.href, auth };
}
