/**
 * A Local storage must not serve treegate's own data directory: store.json (password hashes, the
 * API token), config.json (the JWT secret), the SFTP host keys and in-flight temp files would be
 * readable by whoever may read the storage. AList checks nothing here (treegate is safer: decision 3).
 */
import { realpath } from 'node:fs/promises';
import * as nodePath from 'node:path';
import { VfsError } from '../../src/errors.js';

/**
 * Folders of DATA that hold the server's own secrets and in-flight files: SFTP host keys, upload
 * and offline-download temp files, the SFTP spool. Other folders inside DATA are fine: DATA/storage
 * is the first-start storage's root.
 */
const SERVER_FOLDERS = ['ssh', 'temp', 'tmp'];

const realOr = (p: string) => realpath(p).catch(() => nodePath.resolve(p));
const within = (child: string, parent: string) => child === parent || child.startsWith(parent.endsWith(nodePath.sep) ? parent : parent + nodePath.sep);

/**
 * Refuse a root (its real path: a symlink to DATA is caught too) that is DATA, any folder above it
 * (`/` included), or one of SERVER_FOLDERS.
 */
export async function refuseDataDir(rootReal: string, rootOption: string, dataDir: string): Promise<void> {
  const data = await realOr(dataDir);
  const serverFolders = await Promise.all(SERVER_FOLDERS.map((f) => realOr(nodePath.join(data, f))));
  if (within(data, rootReal) || serverFolders.some((f) => within(rootReal, f))) {
    throw new VfsError('FORBIDDEN', `root folder ${rootOption} would serve treegate's data directory`);
  }
}
