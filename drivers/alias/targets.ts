/**
 * The `paths` option: one target per line, `/path` (named after its last segment) or `name:/path`.
 * Lines with the same name merge. With a single name the alias root is that folder itself.
 */
import { VfsError } from '../../src/errors.js';
import { basename, normalize, segments } from '../../src/paths.js';

export type Targets = Map<string, string[]>;

export function parseTargets(text: string): Targets {
  const out: Targets = new Map();
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line) continue;
    const colon = line.indexOf(':');
    const named = colon > 0 && !line.startsWith('/');
    const path = normalize(named ? line.slice(colon + 1).trim() : line);
    const name = named ? line.slice(0, colon).trim() : basename(path) || 'root';
    out.set(name, [...(out.get(name) ?? []), path]);
  }
  if (!out.size) throw new VfsError('INVALID', 'option paths is required');
  return out;
}

/** Where a driver path points: the candidate tree paths, or the virtual root of several names. */
export function resolve(targets: Targets, path: string): { root: true } | { root: false; candidates: string[] } {
  const s = segments(path);
  if (targets.size === 1) {
    const [dsts] = targets.values();
    return { root: false, candidates: dsts!.map((d) => '/' + [...segments(d), ...s].join('/')) };
  }
  if (!s.length) return { root: true };
  const dsts = targets.get(s[0]!);
  if (!dsts) throw new VfsError('NOT_FOUND', undefined, { path });
  return { root: false, candidates: dsts.map((d) => '/' + [...segments(d), ...s.slice(1)].join('/')) };
}
