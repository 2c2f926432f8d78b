/**
 * SSH public keys per user: parsing what a user pastes, the fingerprint `ssh-keygen -lf` prints,
 * and the lookup the SFTP server uses for publickey auth.
 *
 * A key is stored with its wire blob (base64) so SFTP compares the blob a client offers with the
 * stored bytes, constant-time, without re-parsing anything at login.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import ssh2 from 'ssh2';

// ssh2 is CommonJS: Node's ESM loader exposes only its default export.
const { utils } = ssh2;
import { VfsError } from '../errors.js';
import type { Store } from '../store/store.js';
import type { SshKeyRecord, UserRecord } from '../store/types.js';

export interface ParsedPublicKey {
  /** e.g. `ssh-ed25519` */
  type: string;
  /** The SSH wire blob. */
  blob: Buffer;
  /** `SHA256:<unpadded base64>` */
  fingerprint: string;
}

const KEY_TYPES = new Set(['ssh-ed25519', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521', 'ssh-rsa']);

/**
 * Longest key text accepted. One key line is at most a few KiB (RSA-16384 is 2.8 KiB) and a pasted
 * authorized_keys file rarely more; each line costs a key parse, and a 1 MiB body of short lines
 * held the event loop for half a second.
 */
export const MAX_KEY_TEXT = 64 * 1024;

/**
 * Keys one user may hold, and the longest title. Each key is a store record, and the store is written
 * whole on every change: a user without any file permission added 100 keys with 1 MB titles and made
 * store.json 100 MB (every later write then took about a second).
 */
export const MAX_KEYS_PER_USER = 100;
export const MAX_TITLE = 256;
export const TOO_MANY_KEYS = `at most ${MAX_KEYS_PER_USER} keys per user`;

export const KEY_INVALID = 'provided key invalid';
export const TITLE_EXISTS = 'key with the same title already exists';
export const KEY_NOT_FOUND = 'failed to get public key';

export function fingerprintOf(blob: Buffer): string {
  return 'SHA256:' + createHash('sha256').update(blob).digest('base64').replace(/=+$/, '');
}

/** `type base64 [comment]` → key, or undefined. Only the supported public key types. */
function parseKeyFields(text: string): ParsedPublicKey | undefined {
  const [type, data] = text.trim().split(/\s+/, 2);
  if (!type || !data || !KEY_TYPES.has(type) || !/^[A-Za-z0-9+/]+={0,2}$/.test(data)) return undefined;
  const parsed = utils.parseKey(`${type} ${data}`);
  if (parsed instanceof Error || Array.isArray(parsed) || parsed.isPrivateKey() || parsed.type !== type) return undefined;
  const blob = parsed.getPublicSSH();
  // The canonical re-encoding must be the bytes given, or SFTP clients would offer a different blob.
  if (!blob.equals(Buffer.from(data, 'base64'))) return undefined;
  return { type, blob, fingerprint: fingerprintOf(blob) };
}

/** Length of an authorized_keys options prefix (quoted strings may hold spaces), or -1. */
function optionsEnd(line: string): number {
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '\\' && quoted) i++;
    else if (c === '"') quoted = !quoted;
    else if (!quoted && (c === ' ' || c === '\t')) return i;
  }
  return -1;
}

/**
 * Parse pasted key text like OpenSSH's authorized_keys (and x/crypto's ParseAuthorizedKey): blank
 * and `#` lines are skipped, a line may start with options and end with a comment, and the first
 * line holding a valid public key wins. Private keys are refused outright. Undefined when none.
 */
export function parseAuthorizedKey(text: string): ParsedPublicKey | undefined {
  if (/PRIVATE KEY|PuTTY-User-Key-File/.test(text)) return undefined;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const direct = parseKeyFields(line);
    if (direct) return direct;
    const end = optionsEnd(line);
    if (end > 0) {
      const afterOptions = parseKeyFields(line.slice(end));
      if (afterOptions) return afterOptions;
    }
  }
  return undefined;
}

export async function listKeys(store: Store, userId: number): Promise<SshKeyRecord[]> {
  return store.sshKeys.findBy('user_id', userId);
}

/**
 * Add a key for a user. The title is checked first (AList's order): a duplicate throws
 * VfsError EXISTS `key with the same title already exists`; unparseable text throws INVALID
 * `provided key invalid`.
 */
export async function addKey(store: Store, userId: number, title: string, text: string): Promise<SshKeyRecord> {
  const keyStr = text.trim();
  if (title.length > MAX_TITLE) throw new VfsError('INVALID', `title too long: at most ${MAX_TITLE} characters`);
  const keys = await listKeys(store, userId);
  if (keys.some((k) => k.title === title)) throw new VfsError('EXISTS', TITLE_EXISTS);
  if (keys.length >= MAX_KEYS_PER_USER) throw new VfsError('INVALID', TOO_MANY_KEYS);
  const key = keyStr.length <= MAX_KEY_TEXT ? parseAuthorizedKey(keyStr) : undefined;
  if (!key) throw new VfsError('INVALID', KEY_INVALID);
  const now = new Date().toISOString(); // shown in AList's format by the REST routes (keyView)
  // The key alone is kept (AList stores the marshalled key too), not the text pasted around it:
  // 64 KiB of comments per key, 100 keys per user, made store.json 6 MB larger for each user.
  const blob = key.blob.toString('base64');
  return store.sshKeys.insert({
    user_id: userId, title, fingerprint: key.fingerprint, key_str: `${key.type} ${blob}`, key_blob: blob, added_time: now, last_used_time: now,
  });
}

/**
 * Delete key `id`; with `ownerId`, only if that user owns it. Another user's key and an unknown id
 * look the same (VfsError NOT_FOUND `failed to get public key`), so ids of others cannot be probed.
 */
export async function deleteKey(store: Store, id: number, ownerId?: number): Promise<void> {
  const key = await store.sshKeys.get(id);
  if (!key || (ownerId !== undefined && key.user_id !== ownerId)) throw new VfsError('NOT_FOUND', KEY_NOT_FOUND);
  await store.sshKeys.delete(id);
}

/**
 * For SFTP publickey auth: the user named `username` and their key whose wire blob equals `blob`
 * (constant-time), or undefined. The caller still checks the user is enabled and may use SFTP, and
 * calls touchKey() once the signature has been verified.
 */
export async function findKeyOwner(store: Store, username: string, blob: Buffer): Promise<{ user: UserRecord; key: SshKeyRecord } | undefined> {
  const user = (await store.users.findBy('username', username))[0];
  if (!user) return undefined;
  let found: SshKeyRecord | undefined;
  for (const key of await listKeys(store, user.id)) {
    const stored = Buffer.from(key.key_blob, 'base64');
    // Keep scanning after a match so the time taken does not depend on which key matched.
    if (stored.length === blob.length && timingSafeEqual(stored, blob) && !found) found = key;
  }
  return found && { user, key: found };
}

/** Record a successful login with key `id` (its last_used_time). Unknown ids are ignored. */
export async function touchKey(store: Store, id: number): Promise<void> {
  if (await store.sshKeys.get(id)) await store.sshKeys.update(id, { last_used_time: new Date().toISOString() });
}

/** Remove every key of a user (the user is being deleted). */
export async function deleteUserKeys(store: Store, userId: number): Promise<void> {
  for (const k of await listKeys(store, userId)) await store.sshKeys.delete(k.id);
}
