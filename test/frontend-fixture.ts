/**
 * A tiny fake AList front end for the front-end tests: index.html with AList's placeholders, an
 * entry script that (like the real one) prefixes assets with ALIST.cdn and calls
 * `{api}/api/public/settings`, writing site_title into the page, and a few static files.
 * Next to dist/ sits secret.txt, which no request may ever reach.
 */
import { mkdir, mkdtemp, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const SECRET = 'top-secret-outside-dist';

export const INDEX_HTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8" />
<link rel="icon" href="https://jsd.nn.ci/gh/alist-org/logo@main/logo.svg" />
<title>Loading...</title>
<script>
  window.ALIST = { cdn: undefined, monaco_cdn: undefined, api: undefined, main_color: undefined, base_path: undefined };
  window.__dynamic_base__ = window.ALIST.cdn || '';
</script>
<!-- customize head -->
<link rel="stylesheet" href="/assets/index.css" id="css" />
</head>
<body>
<div id="root" data-marker="fake-frontend">Loading...</div>
<meta name="x-logo" content="https://jsd.nn.ci/gh/alist-org/logo@main/logo.svg" />
<!-- customize body -->
<script>
  var s = document.createElement('script');
  s.src = window.__dynamic_base__ + '/assets/index.js';
  document.body.appendChild(s);
</script>
</body>
</html>
`;

const ENTRY_JS = `(async () => {
  const api = (window.ALIST.api || location.origin + window.ALIST.base_path) + '/api';
  const root = document.getElementById('root');
  try {
    const r = await fetch(api + '/public/settings', { headers: { 'Content-Type': 'application/json;charset=utf-8' } });
    const env = await r.json();
    const h = document.createElement('h1');
    h.id = 'title';
    h.textContent = env.data.site_title;
    h.style.color = window.ALIST.main_color;
    root.replaceChildren(h);
    root.setAttribute('data-ready', 'yes');
  } catch (e) {
    root.textContent = 'System error: ' + e;
  }
})();
`;

export interface FakeFrontend {
  /** The temp dir holding dist/ and secret.txt. */
  dir: string;
  dist: string;
}

export async function makeFakeFrontend(): Promise<FakeFrontend> {
  const dir = await mkdtemp(join(tmpdir(), 'treegate-fe-'));
  const dist = join(dir, 'dist');
  for (const d of ['assets', 'images', 'static', 'streamer']) await mkdir(join(dist, d), { recursive: true });
  await writeFile(join(dir, 'secret.txt'), SECRET);
  await writeFile(join(dist, 'index.html'), INDEX_HTML);
  await writeFile(join(dist, 'assets', 'index.js'), ENTRY_JS);
  await writeFile(join(dist, 'assets', 'index.css'), 'body { font-family: sans-serif; }\nh1 { font-size: 40px; }\n');
  await writeFile(join(dist, 'assets', 'font.woff2'), Buffer.from('wOF2fake'));
  await writeFile(join(dist, 'images', 'dot.png'), Buffer.from('89504e470d0a1a0a', 'hex'));
  await writeFile(join(dist, 'static', 'manifest.json'), '{"name":"fake"}');
  await writeFile(join(dist, 'streamer', 'player.html'), '<p>player</p>');
  await symlink(join(dir, 'secret.txt'), join(dist, 'assets', 'escape.txt')); // points out of dist
  await symlink(join(dist, 'assets', 'index.css'), join(dist, 'assets', 'alias.css')); // stays inside
  return { dir, dist };
}
