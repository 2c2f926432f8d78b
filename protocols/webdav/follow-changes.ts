/**
 * Locks and dead properties are keyed by path, so they follow the tree whichever protocol changed
 * it: a file deleted over REST or SFTP no longer stays locked for WebDAV (a new file of that name
 * would answer 423 until the lock timed out), and a file renamed or moved keeps its properties.
 * The updates run one after another in the order the VFS reported the changes. A WebDAV request
 * waits for them before it starts (a change made over REST a moment ago is already reflected), and a
 * method that changed the tree awaits `settled()` before it answers.
 */
import type { Logger } from 'pino';
import { isWithin } from '../../src/paths.js';
import type { VfsChange, VfsChangeListener } from '../../src/vfs/events.js';
import type { DeadProps } from './dead-props.js';
import type { LockManager } from './locks.js';

export interface TreeFollower {
  /** Resolves once every change reported so far is applied to locks and properties. */
  settled(): Promise<void>;
  /** True while changes are being applied (a request then waits for settled() before it reads). */
  readonly busy: boolean;
  stop(): void;
}

export function followTree(
  onChange: (listener: VfsChangeListener) => () => void,
  locks: LockManager,
  props: DeadProps,
  log: Logger,
  mountPaths: () => readonly string[] = () => [],
): TreeFollower {
  let chain: Promise<void> = Promise.resolve();
  let pending = 0;
  // A storage mounted below a folder that is deleted or moved stays where it is (the VFS leaves it
  // alone), and so do the locks on its files: dropped, a lock holder's writes failed and anyone else
  // could write the file it had locked (dead-props.ts keeps their properties alike).
  const inner = (vpath: string, mounts: readonly string[]) => mounts.filter((m) => m !== vpath && isWithin(vpath, m));
  const apply = async (c: VfsChange): Promise<void> => {
    switch (c.kind) {
      case 'remove':
        await props.removeTree(c.vpath);
        await locks.removeWithin(c.vpath, inner(c.vpath, mountPaths()));
        return;
      case 'move':
        await props.moveTree(c.vpath, c.to);
        await locks.removeWithin(c.vpath, inner(c.vpath, mountPaths()));
        return;
      case 'copy':
        await props.copyTree(c.vpath, c.to);
        return;
      case 'unmounted':
      case 'mounted': {
        // A storage left vpath (deleted or mounted elsewhere), or one now covers it (created or moved
        // over another storage's folder): the files that were served there are not any more. Their
        // locks blocked the files served there now (423) and kept showing in lockdiscovery, and their
        // properties showed on those files of the same names. Storages mounted inside vpath keep theirs.
        const kept = inner(c.vpath, c.mounts);
        await props.removeTreeExcept(c.vpath, kept);
        await locks.removeWithin(c.vpath, kept);
        return;
      }
      default:
        return;
    }
  };
  const stop = onChange((c) => {
    if (c.kind !== 'remove' && c.kind !== 'move' && c.kind !== 'copy' && c.kind !== 'unmounted' && c.kind !== 'mounted') return;
    pending++;
    chain = chain
      .then(() => apply(c))
      .catch((err: unknown) => log.error({ err, change: c.kind }, 'webdav: updating locks or properties after a change failed'))
      .finally(() => void pending--);
  });
  return {
    settled: () => chain,
    get busy() {
      return pending > 0;
    },
    stop,
  };
}
