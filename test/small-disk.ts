/**
 * Small tmpfs disks for the tests of a full disk (mounting needs root, as CI runs: a clear error
 * otherwise). Unmounted lazily, so a file a server still holds open cannot fail the teardown.
 */
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Mount a tmpfs of `size` (`1m`, `256k`) on the existing folder `dir`; returns its unmount. */
export function mountTmpfs(dir: string, size: string): () => void {
  if (process.getuid?.() !== 0) throw new Error('this test mounts a tmpfs and must run as root');
  const m = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { encoding: 'utf8' });
  if (m.status !== 0) throw new Error(`mount tmpfs failed: ${m.stderr}`);
  return () => void spawnSync('umount', ['-l', dir]);
}

export interface SmallDisk {
  /** A fresh folder on the normal disk, holding `disk`. */
  work: string;
  /** The tmpfs. */
  disk: string;
  /** Unmount it and delete both. */
  remove(): Promise<void>;
}

export async function smallDisk(size: string, prefix: string): Promise<SmallDisk> {
  const work = await mkdtemp(join(tmpdir(), prefix));
  const disk = join(work, 'disk');
  await mkdir(disk);
  let unmount: () => void;
  try {
    unmount = mountTmpfs(disk, size);
  } catch (e) {
    await rm(work, { recursive: true, force: true });
    throw e;
  }
  return {
    work,
    disk,
    async remove() {
      unmount();
      await rm(work, { recursive: true, force: true });
    },
  };
}
