/**
 * What an unknown /api route answers. The AList front end calls endpoints for features treegate
 * does not have (alist-frontend.md inventory). Each such call gets a clean envelope the front end
 * shows as a message (never HTML, never a hang). This is consulted only from the not-found handler,
 * so whenever another route plugin implements one of these paths, the real route wins.
 */
import type { Envelope } from '../envelope.js';

/** [path pattern, feature name]. Matched against the path without /api and without the query. */
const FEATURES: Array<[RegExp, string]> = [
  [/^\/auth\/(sso|sso_callback|get_sso_id|sso_get_token)(\/|$)/, 'SSO login'],
  [/^\/auth\/login\/ldap$/, 'LDAP login'],
  [/^\/authn\//, 'WebAuthn'],
  [/^\/fs\/archive\//, 'Archive browsing and extraction'],
  [/^\/admin\/message\//, 'The messenger'],
  [/^\/fs\/other$/, 'Driver-specific operations (fs/other)'],
  [/^\/admin\/setting\/set_(transmission|115|pikpak|thunder)$/, 'Offline download tools'],
  [/^\/fs\/torrent\//, 'Torrents'],
  [/^\/share\//, 'Sharing'],
  [/^\/fs\/multipart\//, 'Multipart upload'],
];

/**
 * Read-only calls a page makes on load for a feature treegate lacks: answering an empty result
 * renders the page cleanly instead of showing an error on every visit (or every 2 s for polls).
 */
const EMPTY: Array<[RegExp, unknown]> = [
  [/^\/authn\/getcredentials$/, []], // profile page: no registered WebAuthn keys
  [/^\/(admin\/)?task\/[a-z_]+\/(undone|done)$/, []], // task pages poll these
];

/** The envelope for an unknown `/api/...` route. */
export function unknownApiRoute(method: string, apiPath: string): Envelope {
  const path = apiPath.slice('/api'.length) || '/';
  for (const [re, data] of EMPTY) if (re.test(path)) return { code: 200, message: 'success', data };
  for (const [re, feature] of FEATURES) {
    if (re.test(path)) return { code: 500, message: `${feature} is not supported by treegate`, data: null };
  }
  return { code: 404, message: `route not found: ${method} ${apiPath}`, data: null };
}
