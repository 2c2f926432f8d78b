/**
 * AList's index.html with its placeholders filled (alist-frontend.md "Serving contract"), the way
 * AList's server/static/static.go does it: plain string replacement of the first occurrence of each
 * placeholder. Replacement is done in one pass over the raw template, so a setting value that happens
 * to contain another placeholder is never re-processed.
 *
 * Two variants: the normal page, and the `/@manage` page without customize head/body (so a broken
 * customisation can always be fixed from the manage pages). Both are rendered once per change of the
 * settings they use, never per request.
 */
import { readFile, stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import type { Settings } from '../../../src/settings/settings.js';

/** The default favicon URL in AList's index.html (the first occurrence is the favicon link). */
export const DEFAULT_FAVICON = 'https://jsd.nn.ci/gh/alist-org/logo@main/logo.svg';

/** Settings the page depends on; a change of any of them re-renders it. */
const KEYS = ['site_title', 'favicon', 'main_color', 'customize_head', 'customize_body'] as const;

/** A JS single-quoted string literal body (values go into `ALIST = { cdn: '…' }`). */
function jsString(s: string): string {
  return s.replace(/[\\'\n\r\u2028\u2029<]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

function htmlText(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Replace the first occurrence of each key of `map` in `raw`, in a single pass. */
export function fillTemplate(raw: string, map: ReadonlyArray<readonly [string, string]>): string {
  const hits = map
    .map(([from, to]) => ({ at: raw.indexOf(from), from, to }))
    .filter((h) => h.at >= 0)
    .sort((a, b) => a.at - b.at);
  let out = '';
  let pos = 0;
  for (const h of hits) {
    if (h.at < pos) continue; // overlapping placeholders: the earlier one wins
    out += raw.slice(pos, h.at) + h.to;
    pos = h.at + h.from.length;
  }
  return out + raw.slice(pos);
}

export class IndexPage {
  private key = '';
  private page = '';
  private managePage = '';

  /** `raw` is dist_dir/index.html; `basePath` is `` or `/tg` (see base-path.ts). */
  constructor(private readonly raw: string, private readonly basePath: string, private readonly settings: Pick<Settings, 'get'>) {}

  /** The page for a request path (`/@manage…` gets the variant without customisation). */
  html(path: string): string {
    const v = KEYS.map((k) => this.settings.get(k));
    const key = JSON.stringify(v);
    if (key !== this.key) {
      this.render(v);
      this.key = key;
    }
    return path === '/@manage' || path.startsWith('/@manage/') ? this.managePage : this.page;
  }

  private render([title, favicon, color, head, body]: string[]): void {
    // AList: cdn = (cdn config or base_path) without a trailing slash; treegate has no cdn config.
    const common: Array<[string, string]> = [
      ['cdn: undefined', `cdn: '${jsString(this.basePath)}'`],
      ['base_path: undefined', `base_path: '${jsString(this.basePath)}'`],
      ['main_color: undefined', `main_color: '${jsString(color!)}'`],
      ['Loading...', htmlText(title!)],
      [DEFAULT_FAVICON, htmlText(favicon!)],
    ];
    this.managePage = fillTemplate(this.raw, common);
    this.page = fillTemplate(this.raw, [...common, ['<!-- customize head -->', head!], ['<!-- customize body -->', body!]]);
  }
}

/** What tells one version of index.html from the next (a rebuild replaces or rewrites it). */
export const stampOf = (st: Stats): string => `${st.ino}:${st.size}:${st.mtimeMs}`;

/**
 * dist_dir/index.html followed on disk. The assets are read from disk on every request, so after a
 * front end was rebuilt in place (new hashed asset names) a page read once at start named assets
 * that were gone: a blank UI until a restart. One stat per page load; the file is read again only
 * when it changed, and while it is missing, empty or unreadable (mid-rebuild) the last page is kept.
 */
export class LiveIndexPage {
  private page: IndexPage;

  constructor(
    private readonly file: string,
    raw: string,
    private stamp: string,
    private readonly basePath: string,
    private readonly settings: Pick<Settings, 'get'>,
  ) {
    this.page = new IndexPage(raw, basePath, settings);
  }

  async html(path: string): Promise<string> {
    try {
      const stamp = stampOf(await stat(this.file));
      if (stamp !== this.stamp) {
        // Stamped before the read: a write still under way changes the stamp, so it is read again.
        // Empty is a rewrite between its truncation and its write: not a page, the last one stays.
        const raw = await readFile(this.file, 'utf8');
        if (raw !== '') {
          this.page = new IndexPage(raw, this.basePath, this.settings);
          this.stamp = stamp;
        }
      }
    } catch {
      // keep the last page (index.html is being replaced)
    }
    return this.page.html(path);
  }
}
