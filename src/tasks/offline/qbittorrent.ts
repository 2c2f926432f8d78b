/**
 * qBittorrent through its WebUI API v2 (alist-compat §12). qbittorrent_url carries the WebUI
 * credentials (`http://user:pass@host:port/`); we log in for a SID cookie (re-login once on 403).
 * A download is `torrents/add` by URL with savepath = the task's temp folder and the tag
 * `treegate-<task id>`, then `torrents/info?tag=` is polled. After the transfers are started the
 * task waits qbittorrent_seedtime minutes, then deletes the torrent without its files.
 */
import type { Settings } from '../../settings/settings.js';
import { sleep, type DownloadJob, type OfflineTool } from './tool.js';

interface TorrentInfo {
  hash: string;
  state: string;
  progress: number;
  size: number;
  total_size?: number;
}

const COMPLETE = new Set(['uploading', 'stalledUP', 'pausedUP', 'queuedUP', 'checkingUP', 'forcedUP']);
const FAILED = new Set(['error', 'missingFiles']);
/** How long a just-added URL may take to show up as a torrent (qBittorrent fetches it first). */
const APPEAR_MS = 60_000;

export const tagOf = (taskId: string) => `treegate-${taskId}`;

export class QbittorrentTool implements OfflineTool {
  readonly name = 'qBittorrent';
  readonly schemes = ['http:', 'https:', 'magnet:', 'bc:'];
  private cookie = '';
  private version = '';

  constructor(private readonly settings: Settings, private readonly pollMs = 1000) {}

  ready(): boolean {
    return this.version !== '';
  }

  /** The WebUI base (no credentials) and the credentials from the setting. */
  private endpoint(): { base: URL; user: string; pass: string } {
    const u = new URL(this.settings.get('qbittorrent_url'));
    const user = decodeURIComponent(u.username);
    const pass = decodeURIComponent(u.password);
    u.username = '';
    u.password = '';
    if (!u.pathname.endsWith('/')) u.pathname += '/';
    return { base: u, user, pass };
  }

  private async login(): Promise<void> {
    const { base, user, pass } = this.endpoint();
    const res = await fetch(new URL('api/v2/auth/login', base), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', referer: base.origin },
      body: new URLSearchParams({ username: user, password: pass }),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    const sid = /SID=([^;]+)/.exec(res.headers.get('set-cookie') ?? '');
    if (!res.ok || text.trim() !== 'Ok.' || !sid) throw new Error(`qBittorrent login failed: ${text.trim() || `HTTP ${res.status}`}`);
    this.cookie = `SID=${sid[1]}`;
  }

  private async call(path: string, body?: FormData | URLSearchParams, signal?: AbortSignal, again = true): Promise<string> {
    if (!this.cookie) await this.login();
    const { base } = this.endpoint();
    const timeout = AbortSignal.timeout(10_000);
    const res = await fetch(new URL(path, base), {
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

  private async info(id: string, signal?: AbortSignal): Promise<TorrentInfo | undefined> {
    const list = JSON.parse(await this.call(`api/v2/torrents/info?tag=${encodeURIComponent(tagOf(id))}`, undefined, signal)) as TorrentInfo[];
    return list[0];
  }

  private remove(hash: string, deleteFiles: boolean): Promise<string> {
    return this.call('api/v2/torrents/delete', new URLSearchParams({ hashes: hash, deleteFiles: String(deleteFiles) }));
  }

  async download(job: DownloadJob): Promise<void> {
    if (!job.args.added) {
      const form = new FormData();
      form.set('urls', job.url.href);
      form.set('savepath', job.dir);
      form.set('tags', tagOf(job.id));
      const answer = await this.call('api/v2/torrents/add', form, job.signal);
      if (answer.trim() !== 'Ok.') throw new Error(`qBittorrent refused the link: ${answer.trim()}`);
      job.patch({ added: true });
    }
    let hash = '';
    const stop = () => void (hash ? this.remove(hash, true).catch(() => undefined) : undefined);
    job.signal.addEventListener('abort', stop, { once: true });
    try {
      const since = Date.now();
      for (;;) {
        const t = await this.info(job.id, job.signal);
        if (!t) {
          if (Date.now() - since > APPEAR_MS) throw new Error('qBittorrent: the torrent did not appear');
        } else {
          if (!hash) job.patch({ hash: (hash = t.hash) });
          job.report(t.state, t.progress * 100, t.total_size ?? t.size);
          if (COMPLETE.has(t.state)) return;
          if (FAILED.has(t.state)) throw new Error(`qBittorrent: torrent state ${t.state}`);
        }
        await sleep(this.pollMs, job.signal);
      }
    } finally {
      job.signal.removeEventListener('abort', stop);
    }
  }

  async afterComplete(job: DownloadJob, setStatus: (s: string) => void): Promise<void> {
    const minutes = this.settings.number('qbittorrent_seedtime');
    if (minutes > 0) {
      setStatus('offline download completed, waiting for seeding');
      await sleep(minutes * 60_000, job.signal);
    }
    if (typeof job.args.hash === 'string') await this.remove(job.args.hash, false);
  }

  async forget(args: Record<string, unknown>): Promise<void> {
    if (typeof args.hash === 'string') await this.remove(args.hash, true).catch(() => undefined);
  }
}
