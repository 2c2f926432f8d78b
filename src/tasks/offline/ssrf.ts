/**
 * SSRF guard for offline downloads (decision 3): a URL whose host is, or resolves to, a loopback,
 * private, link-local, multicast or otherwise non-public address is refused unless the setting
 * `offline_download_allow_private` is "true". SimpleHttp also connects through `guardedLookup`, so
 * the address actually dialled is the one checked (no DNS-rebinding window), and re-checks every
 * redirect hop; so does the egress proxy an aria2 on this machine fetches http(s) through
 * (egress-proxy.ts). The tools' URLs (and every URL inside a magnet link) are checked when added and
 * again when the task runs, and redirects of an http(s) URL are resolved beforehand by
 * `resolveRedirects` (simple-http.ts), the tool getting the final URL. What a tool fetches by
 * itself (qBittorrent, an aria2 elsewhere, aria2's ftp and sftp) is beyond a check at connect time.
 */
import { lookup, type LookupAddress } from 'node:dns';
import { lookup as lookupAsync } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { VfsError } from '../../errors.js';

export const SSRF_MESSAGE = 'refused: the URL resolves to a loopback, private or link-local address (setting offline_download_allow_private)';

function blockList(): BlockList {
  const b = new BlockList();
  for (const [net, bits] of [
    ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
    ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
  ] as const) b.addSubnet(net, bits, 'ipv4');
  for (const [net, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96], ['2002::', 16]] as const) {
    b.addSubnet(net, bits, 'ipv6');
  }
  return b;
}

/**
 * The URLs a magnet link would make a client contact: every parameter value that parses as a URL
 * with a host (trackers, web seeds, sources, ...), nested magnets included, and `x.pe` peers
 * (host:port). A value that looks like a URL but has no host is returned as is, so it is refused.
 */
export function magnetUrls(magnet: URL, depth = 0): URL[] {
  const out: URL[] = [];
  for (const [key, value] of magnet.searchParams) {
    const v = value.trim();
    if (/^x\.pe(\.\d+)?$/i.test(key)) {
      out.push(parseOr(`http://${v}/`));
    } else if (/^magnet:/i.test(v)) {
      out.push(...(depth < 3 ? magnetUrls(parseOr(v), depth + 1) : [parseOr('')]));
    } else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(v)) {
      out.push(parseOr(v)); // trackers (http, udp, wss...), web seeds, sources, manifests
    }
    // anything else (xt=urn:btih:..., dn, xl, so...) is not a URL the client contacts
  }
  return out;
}

/** A URL that fails to parse becomes a hostless one, which checkUrl refuses. */
function parseOr(text: string): URL {
  try {
    return new URL(text);
  } catch {
    return new URL('invalid:');
  }
}

/** dns.lookup with `all: true`: how names are resolved (tests give their own). */
export type Resolver = (hostname: string, options: { all: true; verbatim: true }, callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

export class SsrfGuard {
  private readonly blocked = blockList();

  constructor(private readonly allowPrivate: () => boolean) {}

  /** The rule applies now (offline_download_allow_private is off). */
  enforced(): boolean {
    return !this.allowPrivate();
  }

  /** True when the address may not be contacted (IPv4-mapped IPv6 is judged as its IPv4). */
  isBlocked(address: string): boolean {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return this.blocked.check(mapped[1]!, 'ipv4');
    const family = isIP(address);
    if (family === 0) return true;
    return this.blocked.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }

  refused(): VfsError {
    return new VfsError('FORBIDDEN', SSRF_MESSAGE);
  }

  /**
   * Check a URL's host now (literal or every resolved address). A magnet link has no host: every
   * URL it carries (tr, ws, as, xs, ... and x.pe peer addresses) is checked by the same rule.
   */
  async checkUrl(url: URL): Promise<void> {
    if (this.allowPrivate()) return;
    if (url.protocol === 'magnet:') {
      for (const inner of magnetUrls(url)) await this.checkHost(inner);
      return;
    }
    // A BitComet link (bc://bt/<base64 of name, size, info hash>) is a magnet with only an info
    // hash: `bt` is no host to contact (looked up, it failed every such link).
    if (url.protocol === 'bc:' && url.host === 'bt') return;
    await this.checkHost(url);
  }

  private async checkHost(url: URL): Promise<void> {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (host === '') throw this.refused();
    const addrs = isIP(host) ? [host] : (await lookupAsync(host, { all: true, verbatim: true }).catch(() => [])).map((a) => a.address);
    if (addrs.length === 0) throw new VfsError('UPSTREAM', `cannot resolve host ${host}`);
    if (addrs.some((a) => this.isBlocked(a))) throw this.refused();
  }

  /**
   * A `lookup` for http.request and net.connect: resolves (with `resolve`, the system's by default),
   * refuses blocked addresses, returns what was checked.
   */
  lookup(resolve: Resolver = lookup): LookupFunction {
    return (hostname, options, callback) => {
      resolve(hostname, { all: true, verbatim: true }, (err, addrs) => {
        if (err) return callback(err, '', 0);
        if (!this.allowPrivate() && addrs.some((a) => this.isBlocked(a.address))) return callback(this.refused() as unknown as NodeJS.ErrnoException, '', 0);
        const wanted = options.family === 4 || options.family === 6 ? addrs.filter((a) => a.family === options.family) : addrs;
        if (wanted.length === 0) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
        if (options.all) (callback as unknown as (e: null, a: typeof wanted) => void)(null, wanted);
        else callback(null, wanted[0]!.address, wanted[0]!.family);
      });
    };
  }

  /** Literal-IP hosts skip `lookup` when connecting: check them before dialling. */
  checkLiteral(url: URL): void {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (!this.allowPrivate() && isIP(host) && this.isBlocked(host)) throw this.refused();
  }
}
