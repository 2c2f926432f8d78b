/**
 * qBittorrent through its WebUI API v2 (alist-compat §12). qbittorrent_url carries the WebUI
 * credentials (`http://user:pass@host:port/`); we log in for a SID cookie (re-login once on 403).
 * A download is `torrents/add` by URL with savepath = the task's temp folder and the tag
 * `treegate-<task id>`, then `torrents/info?tag=` is polled. After the transfers are started the
 * task waits qbittorrent_seedtime minutes, then deletes the torrent without its files (a negative
 * seed time leaves it seeding, as AList does). Every run adds the link anew; a run that is
 * cancelled or stopped deletes its torrent with its files, watching for it a while when
 * qBittorrent has not listed it yet. A run that fails (e.g. exceeds
 * offline_download_max_size) deletes only the torrent: a retry adds it again over its files, which
 * qBittorrent checks and resumes from (the task's folder goes when the task ends failed).
 * qBittorrent deletes a torrent's files wherever they are now: files are deleted through it only
 * while they are still in the task's temp folder (a user may have moved the torrent to a folder of
 * theirs); elsewhere only the torrent goes.
 */
import { rm } from 'node:fs/promises';
import { resolve as hostResolve, sep as hostSep } from 'node:path';
import type { Settings } from '../../settings/settings.js';
import { sleep, type DownloadJob, type OfflineTool } from './tool.js';

interface TorrentInfo {
  hash: string;
  state: string;
  progress: number;
  size: number;
  total_size?: number;
  save_path?: string;
  content_path?: string;
}

// qBittorrent 5 calls paused torrents stopped (stoppedUP, stoppedDL); 4.x says pausedUP, pausedDL.
// Seen from a 5.x, a finished torrent the user stopped waited here for good.
const COMPLETE = new Set(['uploading', 'stalledUP', 'pausedUP', 'stoppedUP', 'queuedUP', 'checkingUP', 'forcedUP']);
const FAILED = new Set(['error', 'missingFiles', 'unknown']);

/** What a torrent's state means for its download: done, failed, or still to wait for. */
export function stateOutcome(state: string): 'complete' | 'failed' | 'waiting' {
  return COMPLETE.has(state) ? 'complete' : FAILED.has(state) ? 'failed' : 'waiting';
}
/** How long a just-added URL may take to show up as a torrent (qBittorrent fetches it first). */
const APPEAR_MS = 60_000;

export const tagOf = (taskId: string) => `treegate-${taskId}`;

/** Whether a torrent's files lie inside `dir` (the task's temp folder). */
function filesWithin(t: TorrentInfo, dir: string | undefined): boolean {
  if (!dir) return false;
  const inside = (p: string | undefined) => !!p && (hostResolve(p) === dir || hostResolve(p).startsWith(dir + hostSep));
  return inside(t.save_path) && (t.content_path === undefined || inside(t.content_path));
}

/** fetch, whose own message is only "fetch failed": the reason (ECONNREFUSED...) is its cause. */
function request(url: URL, init: RequestInit): Promise<Response> {
  return fetch(url, init).catch((e: unknown) => {
    const cause = (e as { cause?: { message?: string } }).cause?.message;
    throw cause ? new Error(`${(e as Error).message}: ${cause}`) : e;
  });
}

export class QbittorrentTool implements OfflineTool {
  readonly name = 'qBittorrent';
  readonly schemes = ['http:', 'https:', 'magnet:', 'bc:'];
  readonly followsRedirects = true;
  readonly rechecks = true;
  private cookie = '';
  /** The qbittorrent_url the cookie was issued by: the setting may change, and a SID never goes to another address. */
  private cookieUrl = '';
  private version = '';
  /** Tasks whose torrent is being watched for after they ended (see discard). */
  private readonly watchers = new Map<string, AbortController>();

  constructor(private readonly settings: Settings, private readonly pollMs = 1000, private readonly maxBytes: () => number = () => 0) {}

  ready(): boolean {
    return this.version !== '';
  }

  /** The WebUI base (no credentials) and the credentials from the setting. */
  private endpoint(): { base: URL; user: string; pass: string } {
    let u: URL;
    try {
      u = new URL(this.settings.get('qbittorrent_url'));
    } catch {
      // Node's TypeError carries the text as `input`, password included, and the log prints it.
      throw new Error('qbittorrent_url is not a valid URL');
    }
    const user = decodeURIComponent(u.username);
    const pass = decodeURIComponent(u.password);
    u.username = '';
    u.password = '';
    if (!u.pathname.endsWith('/')) u.pathname += '/';
    return { base: u, user, pass };
  }

  private async login(): Promise<void> {
    const url = this.settings.get('qbittorrent_url');
    const { base, user, pass } = this.endpoint();
    const res = await request(new URL('api/v2/auth/login', base), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', referer: base.origin },
      body: new URLSearchParams({ username: user, password: pass }),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    const sid = /SID=([^;]+)/.exec(res.headers.get('set-cookie') ?? '');
    if (!res.ok || text.trim() !== 'Ok.' || !sid) throw new Error(`qBittorrent login failed: ${text.trim() || `HTTP ${res.status}`}`);
    this.cookie = `SID=${sid[1]}`;
    this.cookieUrl = url;
  }

  private async call(path: string, body?: FormData | URLSearchParams, signal?: AbortSignal, again = true): Promise<string> {
    while (!this.cookie || this.cookieUrl !== this.settings.get('qbittorrent_url')) await this.login();
    const { base } = this.endpoint();
    const timeout = AbortSignal.timeout(10_000);
    const res = await request(new URL(path, base), {
      method: body ? 'POST' : 'GET', body, headers: { cookie: this.cookie, referer: base.origin },
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    const text = await res.text();
    if (res.status === 403 && again) {
      this.cookie = '';
      return this.call(path, body, signal, false);
    }
    if (!res.ok) throw new Error(`qBittorrent ${path}: HTTP ${res.status} ${text.trim()}`);
    return text;
  }

  async init(): Promise<string> {
    this.version = '';
    this.cookie = '';
    await this.login();
    this.version = (await this.call('api/v2/app/version')).trim() || 'unknown';
    return this.version;
  }

  private async tagged(id: string, signal?: AbortSignal): Promise<TorrentInfo[]> {
    return JSON.parse(await this.call(`api/v2/torrents/info?tag=${encodeURIComponent(tagOf(id))}`, undefined, signal)) as TorrentInfo[];
  }

  private remove(hash: string, deleteFiles: boolean): Promise<string> {
    return this.call('api/v2/torrents/delete', new URLSearchParams({ hashes: hash, deleteFiles: String(deleteFiles) }));
  }

  /** Delete torrents, with their files when asked and only those files inside `dir` (see the header). */
  private async removeTorrents(list: readonly TorrentInfo[], deleteFiles: boolean, dir: string | undefined): Promise<void> {
    const withFiles = list.filter((t) => deleteFiles && filesWithin(t, dir));
    const without = list.filter((t) => !withFiles.includes(t));
    if (withFiles.length) await this.remove(withFiles.map((t) => t.hash).join('|'), true);
    if (without.length) await this.remove(without.map((t) => t.hash).join('|'), false);
  }

  /** Delete every torrent carrying the task's tag, with its files in `dir` unless kept; true when there was one. */
  private async removeTagged(id: string, dir: string | undefined, deleteFiles = true): Promise<boolean> {
    const list = await this.tagged(id);
    await this.removeTorrents(list, deleteFiles, dir);
    return list.length > 0;
  }

  /**
   * A download that ends without completing: delete its torrent with its files. When qBittorrent
   * has not listed it yet (it may still be fetching the link), keep watching for it for a bounded
   * time and delete it (and the temp folder it recreates) when it shows up.
   */
  private async discard(id: string, dir: string, keepFiles = false): Promise<void> {
    this.watchers.get(id)?.abort();
    if (await this.removeTagged(id, dir, !keepFiles).catch(() => false)) return;
    const ac = new AbortController();
    this.watchers.set(id, ac);
    void (async () => {
      try {
        for (const end = Date.now() + APPEAR_MS; Date.now() < end && !ac.signal.aborted;) {
          await new Promise((r) => setTimeout(r, this.pollMs).unref());
          if (ac.signal.aborted) return;
          if (await this.removeTagged(id, dir).catch(() => false)) {
            await new Promise((r) => setTimeout(r, 500).unref());
            if (!ac.signal.aborted) await rm(dir, { recursive: true, force: true });
            return;
          }
        }
      } finally {
        if (this.watchers.get(id) === ac) this.watchers.delete(id);
      }
    })();
  }

  async download(job: DownloadJob): Promise<void> {
    this.watchers.get(job.id)?.abort();
    const form = new FormData();
    form.set('urls', job.url.href);
    form.set('savepath', job.dir);
    form.set('tags', tagOf(job.id));
    // With qBittorrent's default torrent management mode set to Automatic, savepath is ignored
    // and the files go to its own download folder: never found here (nor ours to delete).
    form.set('autoTMM', 'false');
    // Likewise its "do not start the download automatically" option and its torrent stop
    // condition: the torrent was added (or left) paused and the task waited for it (pausedDL) for
    // good. 4.x reads `paused`, 5.x `stopped`.
    form.set('paused', 'false');
    form.set('stopped', 'false');
    form.set('stopCondition', 'None');
    // And its "keep incomplete torrents in" folder: the files were written there until complete,
    // outside the task folder, so a cancelled or failed download left them there (never ours to
    // delete, see filesWithin), and a retry could not resume from them.
    form.set('useDownloadPath', 'false');
    let hash = '';
    try {
      const answer = await this.call('api/v2/torrents/add', form, job.signal);
      if (answer.trim() !== 'Ok.') throw new Error(`qBittorrent refused the link: ${answer.trim()}`);
      const since = Date.now();
      for (;;) {
        const t = (await this.tagged(job.id, job.signal))[0];
        if (!t) {
          if (Date.now() - since > APPEAR_MS) throw new Error('qBittorrent: the torrent did not appear');
        } else {
          if (!hash) job.patch({ hash: (hash = t.hash) });
          const size = t.size || t.total_size || 0;
          job.report(t.state, t.progress * 100, size || undefined);
          const max = this.maxBytes();
          if (max > 0 && size > max) throw new Error(`the file is larger than the offline download limit of ${max} bytes`);
          const outcome = stateOutcome(t.state);
          if (outcome === 'complete') return;
          if (outcome === 'failed') throw new Error(`qBittorrent: torrent state ${t.state}`);
        }
        await sleep(this.pollMs, job.signal);
      }
    } catch (e) {
      await this.discard(job.id, job.dir, !job.signal.aborted);
      throw e;
    }
  }

  async afterComplete(job: DownloadJob, setStatus: (s: string) => void): Promise<void> {
    const minutes = this.settings.number('qbittorrent_seedtime');
    // As AList: a negative seed time seeds for good (the torrent stays in qBittorrent).
    if (minutes < 0) return;
    if (minutes > 0) {
      setStatus('offline download completed, waiting for seeding');
      await sleep(minutes * 60_000, job.signal);
    }
    if (typeof job.args.hash === 'string') await this.remove(job.args.hash, false);
  }

  async forget(id: string, args: Record<string, unknown>, keepFiles = false, dir?: string): Promise<void> {
    this.watchers.get(id)?.abort();
    await this.removeTagged(id, dir, !keepFiles).catch(() => undefined);
    if (typeof args.hash === 'string' && args.hash) {
      const byHash = await this.call(`api/v2/torrents/info?hashes=${encodeURIComponent(args.hash)}`).then((t) => JSON.parse(t) as TorrentInfo[], () => []);
      await this.removeTorrents(byHash, !keepFiles, dir).catch(() => undefined);
    }
  }
}
