/**
 * Permission checks of the VFS (alist-compat §3 and decision 3), written once:
 * - create/upload/setModified: the write bit OR a meta write rule reaching the parent folder,
 *   else READ_ONLY;
 * - rename (bit4), move (bit5, plus bit4 when the name changes), copy (bit6), remove (bit7): a
 *   missing bit is FORBIDDEN;
 * - on WebDAV and SFTP every write also needs the protocol's manage bit (FORBIDDEN).
 */
import { can, type AccessContext } from '../auth/principal.js';
import { VfsError } from '../errors.js';
import type { Capabilities } from '../../drivers/types.js';
import type { MetaRules } from './meta.js';

export function requireManage(ctx: AccessContext): void {
  if (!can.manageOn(ctx.principal, ctx.protocol)) throw new VfsError('FORBIDDEN');
}

export function requireBit(ok: boolean): void {
  if (!ok) throw new VfsError('FORBIDDEN');
}

export async function requireWrite(ctx: AccessContext, rules: MetaRules, dirVpath: string): Promise<void> {
  requireManage(ctx);
  if (!(await rules.canWrite(ctx.principal, dirVpath))) throw new VfsError('READ_ONLY');
}

export function requireCap(caps: Capabilities, ...names: Array<keyof Capabilities>): void {
  for (const n of names) if (!caps[n]) throw new VfsError('NOT_SUPPORTED');
}
