/**
 * `[<mount path>](<path inside the storage>)`: how AList names the two ends of a task. Computed
 * through the VFS (storageOf) so tasks never look at mounts or drivers themselves.
 */
import type { AccessContext } from '../auth/principal.js';
import { join, relativeTo } from '../paths.js';
import type { VfsApi } from '../vfs/types.js';

export interface Where {
  mount: string;
  inside: string;
}

export async function whereOf(vfs: VfsApi, ctx: AccessContext, userPath: string): Promise<Where> {
  const abs = join(ctx.principal.basePath, userPath);
  const storage = await vfs.storageOf(ctx, userPath).catch(() => undefined);
  const mount = storage?.mountPath ?? '/';
  return { mount, inside: relativeTo(mount, abs) ?? abs };
}

export const fmtWhere = (w: Where) => `[${w.mount}](${w.inside})`;
