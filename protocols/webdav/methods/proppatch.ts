/**
 * PROPPATCH (RFC 4918 §9.2): dead properties, set and removed in document order, all or nothing.
 * Live DAV: properties are protected (403, the rest 424). Setting Windows' Win32LastModifiedTime
 * also sets the file's mtime through the VFS, so Explorer copies keep their dates (and PROPFIND answers
 * it from that mtime: live-props.ts deadValue).
 */
import { can } from '../../../src/auth/principal.js';
import { isVfsError, VfsError } from '../../../src/errors.js';
import { checkPreconditions, checkWrite } from '../conditions.js';
import type { DeadProp, PropOp } from '../dead-props.js';
import { DavError } from '../errors.js';
import { parseHttpDate } from '../../http-date.js';
import { isLive, MS_NS } from '../live-props.js';
import { MultiStatus, propstat } from '../multistatus.js';
import { hrefOf, parentOf, readBody, vpathOf, type Dav } from '../request.js';
import { DAV_NS, elems, esc, nsElement, parseXml, serializeContent, textOf, type XElem } from '../xml.js';

export function parsePropertyUpdate(body: string): PropOp[] {
  const root = parseXml(body);
  if (root.ns !== DAV_NS || root.local !== 'propertyupdate') throw new DavError(400, 'expected DAV:propertyupdate');
  const ops: PropOp[] = [];
  // The xml:lang in scope at each property element (RFC 4918 §4.3): its own, else the nearest ancestor's.
  const langOf = (e: XElem, inherited: string | undefined) => e.attrs['xml:lang'] ?? inherited;
  for (const action of elems(root, DAV_NS)) {
    if (action.local !== 'set' && action.local !== 'remove') continue;
    for (const prop of elems(action, DAV_NS, 'prop')) {
      const inScope = langOf(prop, langOf(action, langOf(root, undefined)));
      for (const p of elems(prop)) {
        const lang = langOf(p, inScope);
        if (action.local === 'set') ops.push({ op: 'set', prop: { ns: p.ns, local: p.local, xml: serializeContent(p), ...(lang === undefined ? {} : { lang }) } });
        else ops.push({ op: 'remove', ns: p.ns, local: p.local });
      }
    }
  }
  if (!ops.length) throw new DavError(400, 'empty propertyupdate');
  return ops;
}

const nameXml = (ns: string, local: string) => (ns === DAV_NS ? `<D:${local}/>` : nsElement(ns, local));
const opName = (o: PropOp) => (o.op === 'set' ? o.prop : o);

export async function proppatch(dav: Dav): Promise<void> {
  if (!can.webdavManage(dav.ctx.principal)) throw new VfsError('FORBIDDEN');
  const ops = parsePropertyUpdate(await readBody(dav.req));
  const { vfs } = dav.deps;
  const entry = await vfs.stat(dav.ctx, dav.path);
  if (!(await vfs.facts(dav.ctx, parentOf(dav.path))).write) {
    throw new VfsError('READ_ONLY');
  }
  checkPreconditions(dav, entry);
  await checkWrite(dav, [{ path: dav.path }]);

  const protectedOps = ops.filter((o) => isLive(opName(o).ns, opName(o).local));
  const out = new MultiStatus(dav.res);
  // The path as the client wrote it, as PROPFIND answers (request.ts asSent): not its stored NFC form.
  const href = `<D:href>${esc(hrefOf(dav.asSent, entry.isDir, dav.deps.siteBase))}</D:href>`;
  if (protectedOps.length) {
    const forbidden = protectedOps.map((o) => nameXml(opName(o).ns, opName(o).local)).join('');
    const others = ops.filter((o) => !protectedOps.includes(o)).map((o) => nameXml(opName(o).ns, opName(o).local)).join('');
    await out.add(`<D:response>${href}${propstat(forbidden, 403)}${others ? propstat(others, 424) : ''}</D:response>`);
    return out.end();
  }
  await dav.props.apply(vpathOf(dav, dav.path), ops).catch((e: unknown) => {
    // Explorer's copy sets Windows' Win32* properties on every file and folder it writes, and fails
    // the copy on anything but 200: once the dead properties fill their bound (some 17,000 copied
    // files do), every later copy failed with 507. Those are acknowledged without being kept: Windows
    // reads getlastmodified and creationdate in their place, and Win32LastModifiedTime still sets the
    // file's mtime below. Other clients' properties stay 507.
    if (!isVfsError(e, 'NO_SPACE') || !ops.every((o) => opName(o).ns === MS_NS)) throw e;
  });
  const mtime = ops.find((o): o is { op: 'set'; prop: DeadProp } => o.op === 'set' && o.prop.ns === MS_NS && o.prop.local === 'Win32LastModifiedTime');
  if (mtime && !entry.isDir) {
    // Windows sends an RFC 1123 date. Anything else stays a dead property only: Date.parse's rules
    // made `1` 2001-01-01 and `2023` a new mtime for the file.
    const t = parseHttpDate(textOf(parseXml(`<v>${mtime.prop.xml}</v>`)));
    if (t !== undefined) await vfs.setModified(dav.ctx, dav.path, new Date(t)).catch(() => undefined);
  }
  const names = [...new Map(ops.map((o) => [`{${opName(o).ns}}${opName(o).local}`, nameXml(opName(o).ns, opName(o).local)])).values()];
  await out.add(`<D:response>${href}${propstat(names.join(''), 200)}</D:response>`);
  await out.end();
}
