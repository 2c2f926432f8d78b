/**
 * The web front end on the HTTP port (alist-frontend.md "Serving contract", alist-compat §5).
 *
 * - `dist_dir` set: its index.html (placeholders filled, see frontend/index-html.ts) answers every GET
 *   that no route matched and that is not reserved for the API (the SPA fallback); /assets, /images,
 *   /static and /streamer are served from it with a long cache (frontend/static.ts).
 * - `dist_dir` not set: `GET /` answers a small page saying the API is up and how to add a front end.
 * - Always: /favicon.ico redirects to the favicon setting, /robots.txt answers robots_txt, and an
 *   unknown /api route answers an envelope (frontend/unsupported.ts), never HTML.
 *
 * Called directly on the root instance (not through register) because it owns the not-found handler.
 */
import { readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Core } from '../../../src/core.js';
import { basePathOf } from '../../../src/site-url.js';
import { locationOf } from '../../../src/paths.js';
import { LiveIndexPage, stampOf } from '../frontend/index-html.js';
import { STATIC_FOLDERS, staticHandler } from '../frontend/static.js';
import { unknownApiRoute } from '../frontend/unsupported.js';
import { authorizeApi } from '../auth.js';

/** First path segments the SPA fallback must never answer (they belong to the API or to files). */
const RESERVED = new Set(['api', 'd', 'p', 'i', 'dav', 'ping', 'favicon.ico', 'robots.txt', ...STATIC_FOLDERS]);

const NOT_FOUND_TEXT = '404 page not found';

function firstSegment(path: string): string {
  const s = path.split('/')[1] ?? '';
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * What `GET /` shows when no front end is configured. `base` is the base path (site_url's path): the
 * page is reached as `/tg` (no trailing slash) as well, where a relative `ping` link meant `/ping`,
 * outside what a reverse proxy serving only `/tg` forwards.
 */
function welcomePage(version: string, base: string, problem?: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>treegate</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 42em; margin: 3em auto; line-height: 1.5">
<h1>treegate ${escapeHtml(version)}</h1>
<p>The API is up: REST under <code>/api</code> (AList v3 compatible), downloads under <code>/d</code> and <code>/p</code>,
WebDAV under <code>/dav</code>, health check at <a href="${escapeHtml(base)}/ping"><code>/ping</code></a>.</p>
${problem ? `<p><strong>The web front end could not be loaded:</strong> ${escapeHtml(problem)}.</p>\n` : ''}<p>No web front end is configured. To add one, put a built AList-compatible front end (a folder with
<code>index.html</code> and <code>assets/</code>) on this machine, set <code>dist_dir</code> in
<code>DATA/config.json</code> (or the environment variable <code>TREEGATE_DIST_DIR</code>) to that folder, and restart.</p>
</body></html>
`;
}

/**
 * dist_dir (absolute) and its index.html. When it cannot be read, the API still starts (the front
 * end is optional): the problem is logged and shown on the page `GET /` answers instead.
 */
async function loadDist(core: Core): Promise<{ dir: string; index: string; raw: string; stamp: string } | { problem: string }> {
  const distDir = core.config.dist_dir;
  try {
    // Kept unresolved (each request follows it): dist_dir may be a link switched to a new release.
    const dir = resolve(distDir);
    const index = join(dir, 'index.html');
    const stamp = stampOf(await stat(index));
    return { dir, index, raw: await readFile(index, 'utf8'), stamp };
  } catch (e) {
    const problem = `dist_dir ${JSON.stringify(distDir)}: cannot read its index.html (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
    core.log.error({ dist_dir: distDir, err: e }, problem);
    return { problem };
  }
}

export async function registerFrontend(app: FastifyInstance, core: Core): Promise<void> {
  const { settings, config } = core;
  let page: LiveIndexPage | undefined;
  let problem: string | undefined;
  if (config.dist_dir) {
    const dist = await loadDist(core);
    if ('problem' in dist) problem = dist.problem;
    else {
      page = new LiveIndexPage(dist.index, dist.raw, dist.stamp, basePathOf(config.site_url), settings);
      const serve = staticHandler(dist.dir);
      for (const folder of STATIC_FOLDERS) app.route({ method: ['GET', 'HEAD'], url: `/${folder}/*`, handler: serve });
    }
  }
  const welcome = welcomePage(core.version, basePathOf(config.site_url), problem);

  app.route({
    method: ['GET', 'HEAD'],
    url: '/favicon.ico',
    handler: async (_req, reply) => {
      const favicon = settings.get('favicon');
      return favicon ? reply.redirect(locationOf(favicon), 302) : reply.code(404).type('text/plain; charset=utf-8').send(NOT_FOUND_TEXT);
    },
  });
  app.route({
    method: ['GET', 'HEAD'],
    url: '/robots.txt',
    handler: async (_req, reply) => reply.type('text/plain; charset=utf-8').send(settings.get('robots_txt')),
  });

  app.setNotFoundHandler(async (req: FastifyRequest, reply: FastifyReply) => {
    const path = req.url.split('?')[0]!;
    const first = firstSegment(path);
    if (first === 'api') {
      // The admin and task trees are guarded as a whole: who may not call them learns nothing of them.
      if (path.startsWith('/api/admin/') || path.startsWith('/api/task/')) await authorizeApi(core, req, path);
      return reply.code(200).send(unknownApiRoute(req.method, path));
    }
    if ((req.method === 'GET' || req.method === 'HEAD') && !RESERVED.has(first)) {
      if (page) {
        let decoded = path;
        try {
          decoded = decodeURIComponent(path);
        } catch {
          // keep the raw path; only the /@manage check reads it
        }
        return reply.type('text/html; charset=utf-8').header('Cache-Control', 'no-cache').send(await page.html(decoded));
      }
      if (path === '/') return reply.type('text/html; charset=utf-8').header('Cache-Control', 'no-cache').send(welcome);
    }
    return reply.code(404).type('text/plain; charset=utf-8').send(NOT_FOUND_TEXT);
  });
}
