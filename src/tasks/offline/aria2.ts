/**
 * aria2 over JSON-RPC (alist-compat §12): settings aria2_uri and aria2_secret, 4 s per call. Init
 * asks getVersion; a download is addUri with `dir` = the task's temp folder, then tellStatus is
 * polled. When a download finishes with `followedBy` GIDs (a .torrent or magnet fetched first), the
 * task follows them. Cancel removes the GID from aria2.
 */
import { randomUUID } from 'node:crypto';
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

export class Aria2Tool implements OfflineTool {
  readonly name = 'aria2';
  readonly schemes = ['http:', 'https:', 'ftp:', 'sftp:', 'magnet:'];
  private version = '';

  constructor(private readonly settings: Settings, private readonly pollMs = 1000) {}

  ready(): boolean {
    return this.version !== '';
  }

  private async rpc<T>(method: string, params: unknown[], signal?: AbortSignal): Promise<T> {
    const secret = this.settings.get('aria2_secret');
    const body = { jsonrpc: '2.0', id: randomUUID(), method, params: secret ? [`token:${secret}`, ...params] : params };
    const timeout = AbortSignal.timeout(4000);
    const res = await fetch(this.settings.get('aria2_uri'), {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    }).catch((e: unknown) => {
      // fetch's own message is only "fetch failed"; the reason (ECONNREFUSED...) is its cause.
      const cause = (e as { cause?: { message?: string } }).cause?.message;
      throw new Error(cause ? `${(e as Error).message}: ${cause}` : (e as Error).message);
    });
    const json = (await res.json().catch(() => ({}))) as { result?: T; error?: { message?: string } };
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

  async download(job: DownloadJob): Promise<void> {
    let gid = typeof job.args.gid === 'string' ? job.args.gid : '';
    if (!gid) {
      gid = await this.rpc<string>('aria2.addUri', [[job.url.href], { dir: job.dir }], job.signal);
      job.patch({ gid });
    }
    const stop = () => void this.rpc('aria2.forceRemove', [gid]).catch(() => undefined);
    job.signal.addEventListener('abort', stop, { once: true });
    try {
      for (;;) {
        const s = await this.rpc<Aria2Status>('aria2.tellStatus', [gid, ['gid', 'status', 'totalLength', 'completedLength', 'followedBy', 'errorMessage', 'errorCode', 'seeder']], job.signal);
        const total = Number(s.totalLength ?? 0);
        const done = Number(s.completedLength ?? 0);
        job.report(`aria2: ${s.status}`, total > 0 ? (done * 100) / total : 0, total || undefined);
        // A torrent that is seeding has all its bytes: AList counts it as complete.
        const seeding = s.status === 'active' && s.seeder === 'true' && total > 0 && done === total;
        if (s.status === 'complete' || seeding) {
          const next = s.followedBy?.[0];
          if (!next) return;
          gid = next; // the real download behind a torrent/metalink/magnet
          job.patch({ gid });
          continue;
        }
        if (s.status === 'error') throw new Error(`aria2: ${s.errorMessage || `error code ${s.errorCode ?? '?'}`}`);
        if (s.status === 'removed') throw new Error('aria2: download removed');
        await sleep(this.pollMs, job.signal);
      }
    } finally {
      job.signal.removeEventListener('abort', stop);
    }
  }

  async forget(args: Record<string, unknown>): Promise<void> {
    if (typeof args.gid === 'string') await this.rpc('aria2.forceRemove', [args.gid]).catch(() => undefined);
  }
}
