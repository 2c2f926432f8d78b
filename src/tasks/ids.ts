/** Task ids: nanoid's default shape (21 characters of A-Za-z0-9_-), as AList's tache uses. */
import { randomBytes } from 'node:crypto';

const ALPHABET = 'useandom-26T198340PX75pxJACKVERYMINDBUSHWOLF_GQZbfghjklqvwyzrict';

export function taskId(): string {
  const bytes = randomBytes(21);
  let id = '';
  for (const b of bytes) id += ALPHABET[b & 63];
  return id;
}
