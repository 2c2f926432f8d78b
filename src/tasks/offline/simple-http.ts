/**
 * SimpleHttp: a plain GET from this server into the task's temp folder (alist-compat §12).
 * Redirects are followed by hand (at most 10) so that every hop is checked by the SSRF guard and
 * dialled through its lookup. The file name comes from Content-Disposition, else the last URL
 * segment, else the host with `.` → `_`, and is always reduced to one validated path component.
 * A response larger than `maxBytes()` (by Content-Length or by counting) or silent for
 * `idleMs` is an error, so an endless or huge response cannot fill the disk.
 */
import { createWriteStream } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join as hostJoin } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { validateName } from '../../paths.js';
import type { SsrfGuard } from './ssrf.js';
import type { DownloadJob, OfflineTool } from './tool.js';

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const MAX_HOPS = 10;

function safeName(candidate: string | undefined): string | undefined {
  if (!candidate) return undefined;
  const last = candidate.split(/[/\\]/).pop()!.trim();
  try {
    return validateName(last);
  } catch {
    return undefined;
  }
}

/** RFC 6266: filename*=UTF-8''... wins over filename="...". */
export function dispositionName(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const star = /filename\*\s*=\s*([^']*)'[^']*'([^;]+)/i.exec(header);
  if (star) {
    try {
      return safeName(decodeURIComponent(star[2]!.trim()));
    } catch {
      /* fall through to filename= */
    }
  }
  const plain = /filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]+))/i.exec(header);
  return safeName(plain ? (plain[1] ?? plain[2])?.replace(/\\(.)/g, '$1') : undefined);
}

export function fileNameFor(url: URL, disposition: string | undefined): string {
  const fromHeader = dispositionName(disposition);
  if (fromHeader) return fromHeader;
  let seg = url.pathname.split('/').filter(Boolean).pop();
  try {
    seg = seg && decodeURIComponent(seg);
  } catch {
    /* keep it encoded */
  }
  return safeName(seg) ?? safeName(url.hostname.replace(/\./g, '_')) ?? 'download';
}

/** GET through the guard (literal hosts checked, names resolved by the guard's lookup). */
function guardedGet(guard: SsrfGuard, url: URL, signal: AbortSignal, idleMs: number): Promise<IncomingMessage> {
  guard.checkLiteral(url);
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(url, { lookup: guard.lookup(), signal, headers: { 'user-agent': 'treegate', accept: '*/*' } }, resolve);
    req.setTimeout(idleMs, () => req.destroy(new Error('download timed out')));
    req.on('error', reject);
    req.end();
  });
}

/**
 * GET `start`, following redirects, every hop checked and dialled through the guard: the first
 * answer that is not a redirect (unread), or no answer when a redirect leaves http(s).
 */
async function follow(guard: SsrfGuard, start: URL, signal: AbortSignal, idleMs: number): Promise<{ url: URL; res?: IncomingMessage }> {
  let url = start;
  for (let hop = 0; hop <= MAX_HOPS; hop++) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return { url };
    const res = await guardedGet(guard, url, signal, idleMs);
    if (!REDIRECTS.has(res.statusCode ?? 0) || !res.headers.location) return { url, res };
    // Dropped, not drained: a redirect's body may never end, and nothing would stop reading it.
    res.destroy();
    url = new URL(res.headers.location, url);
  }
  throw new Error('too many redirects');
}

/**
 * For tools that follow redirects themselves (aria2, qBittorrent): follow an http(s) URL's
 * redirects here, reading only the headers (GET, as some servers refuse HEAD; the body is dropped),
 * and answer the final URL. A final status >= 400 is left for the tool to report; a hop to another
 * scheme ends the walk at that URL, which is checked too.
 */
export async function resolveRedirects(guard: SsrfGuard, start: URL, signal: AbortSignal, idleMs = 30_000): Promise<URL> {
  const { url, res } = await follow(guard, start, signal, idleMs);
  if (res) res.destroy(); // headers are all we need
  else await guard.checkUrl(url);
  return url;
}

export class SimpleHttpTool implements OfflineTool {
  readonly name = 'SimpleHttp';
  readonly schemes = ['http:', 'https:'];

  constructor(private readonly guard: SsrfGuard, private readonly maxBytes: () => number, private readonly idleMs = 60_000) {}

  ready(): boolean {
    return true;
  }

  async init(): Promise<string> {
    return 'ok';
  }

  async download(job: DownloadJob): Promise<void> {
    const { url, res } = await follow(this.guard, job.url, job.signal, this.idleMs);
    if (!res) throw new Error(`unsupported URL scheme ${url.protocol}`);
    const status = res.statusCode ?? 0;
    if (status >= 400) {
      res.destroy(); // not drained: its body may never end
      throw new Error(`http status code ${status}`);
    }
    await this.save(job, url, res);
  }

  private async save(job: DownloadJob, url: URL, res: IncomingMessage): Promise<void> {
    const max = this.maxBytes();
    const lenText = res.headers['content-length'];
    const total = lenText && /^\d+$/.test(lenText) ? Number(lenText) : undefined;
    if (total !== undefined && max > 0 && total > max) {
      res.destroy();
      throw new Error(`the file is larger than the offline download limit of ${max} bytes`);
    }
    const name = fileNameFor(url, res.headers['content-disposition']);
    let got = 0;
    job.report('downloading', 0, total);
    const counter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        got += chunk.length;
        if (max > 0 && got > max) return cb(new Error(`the download exceeds the offline download limit of ${max} bytes`));
        job.report('downloading', total ? (got * 100) / total : 0, total);
        cb(null, chunk);
      },
    });
    await pipeline(res, counter, createWriteStream(hostJoin(job.dir, name), { mode: 0o600 }), { signal: job.signal });
    if (total !== undefined && got !== total) throw new Error(`the response ended after ${got} of ${total} bytes`);
    job.report('completed', 100, got);
  }
}
