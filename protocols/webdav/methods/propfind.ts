/**
 * PROPFIND (RFC 4918 §9.1): Depth 0 and 1 (infinity is refused with 403 propfind-finite-depth),
 * allprop (+include), propname and named properties, live and dead. The listing comes from one
 * vfs.list call (hidden entries are already gone) and is streamed out as it is rendered.
 */
import { isVfsError } from '../../../src/errors.js';
import type { Entry } from '../../../src/vfs/types.js';
import { keyOf } from '../dead-props.js';
import { DavError } from '../errors.js';
import { ALLPROP, LIVE, WRITABLE_LIVE, allLive, deadValue, type LiveCtx, type Quota } from '../live-props.js';
import { MultiStatus, propstat } from '../multistatus.js';
import { childHrefBase, hrefOf, hrefSegment, readBody, vpathOf, type Dav } from '../request.js';
import { DAV_NS, child, elems, esc, nsElement, parseXml, type XElem } from '../xml.js';

interface QName {
  ns: string;
  local: string;
}
type Want = { kind: 'allprop'; include: QName[] } | { kind: 'propname' } | { kind: 'prop'; names: QName[] };

/**
 * Distinct properties one PROPFIND may name. Every entry's answer names each of them, so a 1 MiB
 * body naming one property 170,000 times made a 300 MB answer for a folder of 300 entries: names
 * asked twice are answered once, and past this many the request is 400. Clients ask for a few
 * dozen; this leaves room to read back by name the thousands of properties one resource may carry
 * (test/webdav-quirks-probe.test.ts sets and reads 5,000).
 */
export const MAX_NAMED_PROPS = 10_000;

export function parsePropfind(body: string): Want {
  if (body.trim() === '') return { kind: 'allprop', include: [] };
  const root = parseXml(body);
  if (root.ns !== DAV_NS || root.local !== 'propfind') throw new DavError(400, 'expected DAV:propfind');
  const names = (e: XElem | undefined) => {
    const unique = new Map<string, QName>();
    for (const p of e ? elems(e) : []) unique.set(keyOf(p.ns, p.local), { ns: p.ns, local: p.local });
    if (unique.size > MAX_NAMED_PROPS) throw new DavError(400, `at most ${MAX_NAMED_PROPS} properties may be named`);
    return [...unique.values()];
  };
  const prop = child(root, DAV_NS, 'prop');
  if (prop) return { kind: 'prop', names: names(prop) };
  if (child(root, DAV_NS, 'propname')) return { kind: 'propname' };
  if (child(root, DAV_NS, 'allprop')) return { kind: 'allprop', include: names(child(root, DAV_NS, 'include')) };
  throw new DavError(400, 'propfind needs prop, propname or allprop');
}

const qnameXml = (q: QName) => (q.ns === DAV_NS ? `<D:${q.local}/>` : nsElement(q.ns, q.local));

export async function propfind(dav: Dav): Promise<void> {
  const depth = String(dav.req.headers.depth ?? '1').trim().toLowerCase();
  if (depth !== '0' && depth !== '1') {
    if (depth === 'infinity') throw new DavError(403, 'Depth: infinity is not supported', 'propfind-finite-depth');
    throw new DavError(400, 'bad Depth header');
  }
  const want = parsePropfind(await readBody(dav.req));
  const { vfs } = dav.deps;

  let self: Entry;
  let children: Entry[] = [];
  if (depth === '1') {
    try {
      const listing = await vfs.list(dav.ctx, dav.path);
      self = listing.dir;
      children = listing.entries;
    } catch (e) {
      if (!isVfsError(e, 'NOT_A_DIR')) throw e;
      self = await vfs.stat(dav.ctx, dav.path);
    }
  } else self = await vfs.stat(dav.ctx, dav.path);

  const asked = want.kind === 'prop' ? want.names : want.kind === 'allprop' ? want.include : [];
  const wantsQuota = asked.some((n) => n.ns === DAV_NS && n.local.startsWith('quota-'));
  const parent = dav.path === '/' ? '' : dav.path;
  const quotas = new Map<string, Quota>(); // by vpath
  if (wantsQuota) {
    const quotaAt = async (path: string): Promise<Quota> => {
      const u = await vfs.usage(dav.ctx, path).catch(() => ({}) as { total?: number; free?: number; used?: number });
      return { available: u.free ?? (u.total !== undefined && u.used !== undefined ? u.total - u.used : undefined), used: u.used };
    };
    quotas.set(self.vpath, await quotaAt(dav.path));
    // A storage mounted in the folder (a virtual member) has figures of its own: its members were
    // answered the listed folder's storage's, which Depth 0 on them contradicted. Asked together: a
    // folder may hold many mount points, some of them remote.
    const mounted = children.filter((c) => c.virtual);
    const figures = await Promise.all(mounted.map((c) => quotaAt(parent + '/' + c.name)));
    mounted.forEach((c, i) => quotas.set(c.vpath, figures[i]!));
  }
  const basePath = dav.ctx.principal.basePath;
  const live: LiveCtx = {
    basePath,
    siteBase: dav.deps.siteBase,
    quota: (e) => quotas.get(e.vpath) ?? quotas.get(self.vpath),
    locks: (e) => (dav.locks.empty ? [] : dav.locks.covering(e.vpath)),
  };
  const render = renderer(dav, want, live);
  const out = new MultiStatus(dav.res);
  await out.add(render(self, hrefOf(dav.asSent, self.isDir, dav.deps.siteBase), dav.path));
  if (children.length) {
    const base = childHrefBase(dav.asSent, dav.deps.siteBase); // the client's form (request.ts asSent)
    for (const c of children) {
      await out.add(render(c, base + hrefSegment(c.name) + (c.isDir ? '/' : ''), parent + '/' + c.name));
    }
  }
  await out.end();
}

type Renderer = (e: Entry, href: string, userPath: string) => string;

function renderer(dav: Dav, want: Want, live: LiveCtx): Renderer {
  const deadOf = (userPath: string) => (dav.props.empty ? [] : dav.props.get(vpathOf(dav, userPath)));
  const wrap = (href: string, inner: string) => `<D:response><D:href>${esc(href)}</D:href>${inner}</D:response>`;

  if (want.kind === 'propname') {
    return (e, href, p) => {
      const names = ALLPROP.filter((n) => LIVE[n]!(e, live) !== undefined).map((n) => `<D:${n}/>`);
      for (const d of deadOf(p)) if (d.ns !== DAV_NS || !(d.local in LIVE)) names.push(nsElement(d.ns, d.local)); // a set displayname: named above
      return wrap(href, propstat(names.join(''), 200));
    };
  }
  if (want.kind === 'allprop') {
    return (e, href, p) => {
      const dead = deadOf(p);
      const shown = dead.length ? dead.find((d) => d.ns === DAV_NS && d.local === 'displayname') : undefined; // WRITABLE_LIVE
      let found = shown ? allLive(e, live, nsElement(shown.ns, shown.local, shown.xml, shown.lang)) : allLive(e, live);
      for (const d of dead) if (d.ns !== DAV_NS || !(d.local in LIVE)) found += nsElement(d.ns, d.local, deadValue(d, e), d.lang);
      for (const q of want.include) if (q.ns === DAV_NS && q.local.startsWith('quota-')) found += LIVE[q.local]?.(e, live) ?? '';
      return wrap(href, propstat(found, 200));
    };
  }
  const names = want.names;
  return (e, href, p) => {
    let found = '';
    let missing = '';
    const dead = deadOf(p);
    // Many names asked of many properties: one lookup table instead of a scan per name (quadratic).
    const byName = dead.length > 16 && names.length > 16 ? new Map(dead.map((d) => [keyOf(d.ns, d.local), d])) : undefined;
    const deadNamed = (q: QName) => (byName ? byName.get(keyOf(q.ns, q.local)) : dead.find((x) => x.ns === q.ns && x.local === q.local));
    for (const q of names) {
      // A writable live property (displayname) answers its dead value while one is set.
      const liveFn = q.ns === DAV_NS && !(WRITABLE_LIVE.has(q.local) && deadNamed(q)) ? LIVE[q.local] : undefined;
      const v = liveFn ? liveFn(e, live) : undefined;
      if (v !== undefined) {
        found += v;
        continue;
      }
      const d = deadNamed(q);
      if (d) found += nsElement(d.ns, d.local, deadValue(d, e), d.lang);
      else missing += qnameXml(q);
    }
    // An empty <D:prop/> still gets a (empty) propstat: a response needs one (RFC 4918 §14.24).
    return wrap(href, (found || !missing ? propstat(found, 200) : '') + (missing ? propstat(missing, 404) : ''));
  };
}
