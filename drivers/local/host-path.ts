/**
 * Mapping driver paths to host paths without ever leaving the root. A driver path is split into
 * validated segments (src/paths.ts refuses `..`, `\` and NUL), joined under the root, and then the
 * real location is checked: the realpath of the path, or of its nearest existing ancestor when it
 * does not exist yet, must lie inside the root's realpath. A symlink pointing outside the root is
 * therefore refused for reading and writing alike.
 */
import { realpath } from 'node:fs/promises';
import * as nodePath from 'node:path';
import { VfsError } from '../../src/errors.js';
import { segments } from '../../src/paths.js';

export class HostPaths {
  /** `root` must be absolute; `realRoot` its realpath (set by the driver's init). */
  constructor(readonly root: string, private readonly realRoot: string) {}

  /** The lexical host path of a driver path (no file system access, no symlink check). */
  lexical(dpath: string): string {
    return nodePath.join(this.root, ...segments(dpath));
  }

  inside(real: string): boolean {
    if (real === this.realRoot) return true;
    const prefix = this.realRoot.endsWith(nodePath.sep) ? this.realRoot : this.realRoot + nodePath.sep;
    return real.startsWith(prefix);
  }

  /**
   * The host path of a driver path after proving that its real location is inside the root.
   * Returns the lexical path (so lstat/rename act on the entry itself) and the resolved one.
   */
  async resolve(dpath: string): Promise<{ host: string; real: string }> {
    const host = this.lexical(dpath);
    let probe = host;
    const rest: string[] = [];
    for (;;) {
      try {
        const real = nodePath.join(await realpath(probe), ...rest);
        if (!this.inside(real)) throw new VfsError('FORBIDDEN', 'path leaves the storage root', { path: dpath });
        return { host, real };
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw e;
        if (probe === this.root || probe === nodePath.dirname(probe)) {
          throw new VfsError('NOT_FOUND', undefined, { path: dpath, cause: e });
        }
        rest.unshift(nodePath.basename(probe));
        probe = nodePath.dirname(probe);
      }
    }
  }
}
