/**
 * Reading the tree over REST (alist-compat §9): fs/list, fs/get, fs/dirs, fs/link (fs/search:
 * ./search.ts). Every access decision (hide, path password, base path, refresh needing write) is
 * the VFS's; this file only shapes AList's answers. list/get/dirs are registered for GET and POST
 * like AList's `any` routes; fs/link is POST only, as in AList.
 */
import type { FastifyRequest } from 'fastify';
import type { Core } from '../../../src/core.js';
import type { AccessContext } from '../../../src/auth/principal.js';
import { can } from '../../../src/auth/principal.js';
import { encodePathForUrl, isWithin, parent } from '../../../src/paths.js';
import { isVfsError } from '../../../src/errors.js';
import type { Entry, StorageInfo } from '../../../src/vfs/types.js';
import type { RoutePlugin } from '../route-types.js';
import { accessContext } from '../app.js';
import { ApiError, ok } from '../envelope.js';
import { apiUrl, formatTime, nameMapper, toObjResp } from '../entry.js';
import { bool, downProxy, fields, int, mustProxy, paginate, signIf, signRequired, str } from '../fs-common.js';
import { LINK_PRINCIPAL } from './download.js';
import { requireAdmin } from '../auth.js';
import { signPath } from '../../../src/sign.js';

const ANY = ['GET', 'POST'] as const;

/** list with refresh: the VFS refuses it without write; AList's exact message. */
async function listing(core: Core, ctx: AccessContext, path: string, refresh: boolean) {
  try {
    const l = await core.vfs.list(ctx, path, { refresh });
    if (refresh && !l.facts.write) throw new ApiError(403, 'Refresh without permission');
    return l;
  } catch (e) {
    if (refresh && isVfsError(e, 'READ_ONLY')) throw new ApiError(403, 'Refresh without permission');
    throw e;
  }
}

/** raw_url of a file (alist-compat §9 fs/get). */
async function rawUrl(
  core: Core, req: FastifyRequest, ctx: AccessContext, path: string, entry: Entry, storage: StorageInfo | undefined, sign: string,
): Promise<string> {
  if (entry.isDir || !storage) return '';
  const enc = encodePathForUrl(entry.vpath);
  const api = apiUrl(req, core.config.site_url);
  const q = sign ? `?sign=${encodeURIComponent(sign)}` : '';
  if (mustProxy(storage)) {
    const dpu = downProxy(storage);
    if (dpu) return `${dpu}${enc}?sign=${encodeURIComponent(signIf(core, true, entry.vpath))}`;
    return `${api}/p${enc}${q}`;
  }
  const { link } = await core.vfs.link(ctx, path);
  return link.kind === 'url' ? link.url : `${api}/d${enc}${q}`;
}

/** Can a rule among `guarded` (AccessChecker.guarded) decide anything about the entries of `dir`. */
const guards = (guarded: readonly string[], dir: string) => guarded.some((g) => isWithin(g, dir) || isWithin(dir, g));

/**
 * Which files of the folder `dirVpath` get a sign for their /d and /p links. A sign opens the link
 * as SIGNED_LINK, which skips path passwords and sees hidden entries (download.ts), so it goes only
 * to files this caller may open with the password it gave: a listing shows a file that a path
 * password on the file itself protects, and signing it (sign_all, the default) handed anyone who
 * could list the folder a link that opened the file without its password.
 * - `required` (sign_all, enable_sign, a password on the folder): every such file is signed;
 * - otherwise only those the anonymous link principal cannot reach: hidden ones (listed to a
 *   principal who sees them, or to a user based below a hidden folder, whose base path is exempt:
 *   MetaRules.isHidden) or ones behind a password on the file itself. Unsigned, their links failed.
 */
async function linkSigns(core: Core, ctx: AccessContext, dirVpath: string, required: boolean): Promise<(vpath: string) => boolean> {
  const mine = await core.rules.accessChecker(ctx.principal, ctx.password);
  const mayOpen = guards(mine.guarded, dirVpath) ? (v: string) => mine.canAccess(v) : () => true;
  if (required) return mayOpen;
  const link = await core.rules.accessChecker(LINK_PRINCIPAL, undefined);
  if (!guards(link.guarded, dirVpath)) return () => false;
  return (v) => !link.canAccess(v) && mayOpen(v);
}

const routes: RoutePlugin = async (app, { core }) => {
  const mapName = () => nameMapper(core.settings);

  app.route({
    method: [...ANY],
    url: '/api/fs/list',
    handler: async (req) => {
      const f = fields(req);
      const ctx = accessContext(req, str(f, 'password'));
      const l = await listing(core, ctx, str(f, 'path') || '/', bool(f.refresh));
      const signed = signRequired(core, l.storage, l.facts.passwordProtected);
      const page = paginate(l.entries, int(f, 'page'), int(f, 'per_page'));
      const mn = mapName();
      const signs = page.length ? await linkSigns(core, ctx, parent(page[0]!.vpath), signed) : () => false;
      const api = apiUrl(req, core.config.site_url);
      return ok({
        content: page.map((e) => toObjResp(e, { sign: signIf(core, !e.isDir && signs(e.vpath), e.vpath), settings: core.settings, mapName: mn, listType: true, api })),
        total: l.entries.length,
        readme: l.facts.readme,
        header: l.facts.header,
        write: l.facts.write,
        provider: l.storage?.driverName ?? 'unknown',
      });
    },
  });

  app.route({
    method: [...ANY],
    url: '/api/fs/get',
    handler: async (req) => {
      const f = fields(req);
      const ctx = accessContext(req, str(f, 'password'));
      const path = str(f, 'path') || '/';
      const entry = await core.vfs.stat(ctx, path);
      const storage = await core.vfs.storageOf(ctx, path, 'read');
      const facts = await core.vfs.facts(ctx, path);
      const required = signRequired(core, storage, facts.passwordProtected);
      const sign = signIf(core, !entry.isDir && (await linkSigns(core, ctx, parent(entry.vpath), required))(entry.vpath), entry.vpath);
      const obj = toObjResp(entry, { sign, settings: core.settings, mapName: mapName(), listType: false, api: apiUrl(req, core.config.site_url) });
      if (entry.vpath === '/' && entry.name === '') obj.name = 'root';
      return ok({
        ...obj,
        raw_url: await rawUrl(core, req, ctx, path, entry, storage, sign),
        readme: facts.readme,
        header: facts.header,
        provider: storage?.driverName ?? 'unknown',
        related: null,
      });
    },
  });

  app.route({
    method: [...ANY],
    url: '/api/fs/dirs',
    handler: async (req) => {
      const f = fields(req);
      let ctx = accessContext(req, str(f, 'password'));
      if (bool(f.force_root)) {
        if (!can.isAdmin(ctx.principal)) throw new ApiError(403, 'Permission denied');
        ctx = { ...ctx, principal: { ...ctx.principal, basePath: '/' } };
      }
      const l = await core.vfs.list(ctx, str(f, 'path') || '/');
      return ok(l.entries.filter((e) => e.isDir).map((e) => ({ name: e.name, modified: formatTime(e.modified) })));
    },
  });

  /**
   * POST /api/fs/link (AList server/handles/fsmanage.go `Link`, admin only): the real link of a file
   * for proxy programs, as AList's model.Link `{url, header}`. The path is the full tree path, never
   * joined to a base path. A file served by this server (only_local, or a driver without a URL
   * link) gets `<api_url>/p<path>?d&sign=<sign>` (`/d` when the storage does not proxy, e.g. an
   * Alias): always signed, and `d` makes it stream rather than redirect to down_proxy_url.
   * Otherwise the driver's URL and the headers it needs (the reason AList keeps this to admins). Unlike AList, a folder or a missing path is an error
   * rather than a link that cannot work.
   */
  app.post('/api/fs/link', { preHandler: requireAdmin }, async (req) => {
    const base = accessContext(req);
    const ctx: AccessContext = { ...base, principal: { ...base.principal, basePath: '/' } };
    const { entry, link, storage } = await core.vfs.link(ctx, str(fields(req), 'path') || '/');
    if (storage.config.only_local || link.kind !== 'url') {
      const sign = encodeURIComponent(signPath(core.settings, entry.vpath));
      // /p answers "proxy not allowed" for a storage that does not proxy (download.ts), yet an
      // Alias's files are streamed by treegate all the same: those go through /d, as raw_url does.
      const kind = mustProxy(storage) ? 'p' : 'd';
      return ok({ url: `${apiUrl(req, core.config.site_url)}/${kind}${encodePathForUrl(entry.vpath)}?d&sign=${sign}`, header: null });
    }
    // Go's http.Header: every value a list of strings; null when the driver needs none.
    const headers = Object.entries(link.headers ?? {});
    return ok({ url: link.url, header: headers.length ? Object.fromEntries(headers.map(([k, v]) => [k, [v]])) : null });
  });

  // /api/fs/search lives in ./search.ts (the search service's route).
};

export default routes;
