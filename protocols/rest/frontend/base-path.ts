/**
 * base_path: serving treegate under a sub-path behind a reverse proxy (AList's `site_url` path).
 * site_url `https://nas/tg` (or just `/tg`) → base path `/tg`; no path, or `/` → `` (served at the root).
 *
 * The prefix is removed once, at the HTTP server's edge (src/server.ts), before a request reaches
 * WebDAV or fastify, so no route has to know about it. A request that arrives without the prefix is
 * served as it is, so a proxy that already strips the prefix works too. The base path itself comes
 * from src/site-url.ts (basePathOf), which the config checks at start.
 */

/** `url` (path + query) without the base path when it starts with it on a segment boundary. */
export function stripBasePath(url: string, base: string): string {
  if (!base || !url.startsWith(base)) return url;
  const rest = url.slice(base.length);
  if (rest === '') return '/';
  if (rest[0] === '/') return rest;
  if (rest[0] === '?') return '/' + rest;
  return url; // `/tgx` is not under `/tg`
}

/**
 * The same for an absolute URL header (WebDAV's `Destination: http://host/tg/dav/x`), so the WebDAV
 * adapter sees the same unprefixed paths in headers as in the request line.
 */
export function stripBasePathInUrl(value: string, base: string): string {
  if (!base) return value;
  const m = /^([a-z][a-z0-9+.-]*:\/\/[^/?#]*)(.*)$/i.exec(value);
  return m ? m[1]! + stripBasePath(m[2] || '/', base) : stripBasePath(value, base);
}

/** Remove the base path from a request in place: its URL and a WebDAV `Destination` header. */
export function stripBasePathFromRequest(req: { url?: string; headers: Record<string, string | string[] | undefined> }, base: string): void {
  if (!base) return;
  req.url = stripBasePath(req.url ?? '/', base);
  const dest = req.headers.destination;
  if (typeof dest === 'string') req.headers.destination = stripBasePathInUrl(dest, base);
}
