/**
 * PROPFIND request body and multistatus parsing. Namespaces are stripped (servers differ in prefixes),
 * hrefs are resolved against the request URL and percent-decoded per segment.
 */
import { XMLParser } from 'fast-xml-parser';

export const PROPFIND_BODY = '<?xml version="1.0" encoding="utf-8"?>'
  + '<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/></D:prop></D:propfind>';

export interface DavEntry {
  /** Decoded path segments of the href. */
  segments: string[];
  isDir: boolean;
  size: number;
  modified: Date;
}

type Node = Record<string, unknown>;

const parser = new XMLParser({
  removeNSPrefix: true,
  ignoreAttributes: true,
  parseTagValue: false,
  isArray: (name) => name === 'response' || name === 'propstat',
});

function decodeSegments(pathname: string): string[] {
  return pathname.split('/').filter((s) => s !== '').map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s; // a server that does not escape `%`
    }
  });
}

function okProps(resp: Node): Node {
  const out: Node = {};
  for (const ps of (resp.propstat as Node[] | undefined) ?? []) {
    const status = String(ps.status ?? '');
    if (status && !/\s2\d\d\s?/.test(status)) continue;
    Object.assign(out, (ps.prop as Node | undefined) ?? {});
  }
  return out;
}

/** Entries of a 207 multistatus body; `base` is the URL the PROPFIND was sent to. */
export function parseMultistatus(xml: string, base: URL): DavEntry[] {
  const doc = parser.parse(xml) as Node;
  const ms = (doc.multistatus ?? {}) as Node;
  const out: DavEntry[] = [];
  for (const r of (ms.response as Node[] | undefined) ?? []) {
    const href = String(r.href ?? '').trim();
    if (!href) continue;
    const props = okProps(r);
    const rt = props.resourcetype;
    const isDir = typeof rt === 'object' && rt !== null && 'collection' in rt;
    const size = Number(props.getcontentlength ?? 0);
    const lm = props.getlastmodified ? new Date(String(props.getlastmodified)) : new Date(0);
    out.push({
      segments: decodeSegments(new URL(href, base).pathname),
      isDir,
      size: Number.isFinite(size) && !isDir ? size : 0,
      modified: Number.isNaN(lm.getTime()) ? new Date(0) : lm,
    });
  }
  return out;
}
