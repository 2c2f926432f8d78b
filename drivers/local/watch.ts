/**
 * Local's `watch` capability: chokidar follows the root folder and reports the driver path of
 * anything added, changed or removed by other programs. Upload temp files (our own, renamed into
 * place when complete) are ignored, so a half-written upload is never reported; the final rename
 * is. Symlinks are not followed, like listings that never leave the root.
 */
import * as nodePath from 'node:path';
import { watch } from 'chokidar';
import { TEMP_PREFIX } from './listing.js';

export function watchRoot(root: string, showHidden: boolean, onChange: (dpath: string) => void): () => Promise<void> {
  const ignored = (p: string) => {
    const name = nodePath.basename(p);
    return name.startsWith(TEMP_PREFIX) || (!showHidden && name.startsWith('.') && p !== root);
  };
  const w = watch(root, { ignoreInitial: true, followSymlinks: false, ignored, persistent: true });
  w.on('all', (_event, p) => {
    const rel = nodePath.relative(root, p);
    if (rel.startsWith('..') || nodePath.isAbsolute(rel)) return;
    onChange('/' + rel.split(nodePath.sep).filter(Boolean).join('/'));
  });
  // A vanished or unreadable folder is not fatal for the storage: the index just misses its events.
  w.on('error', () => undefined);
  return () => w.close();
}
