/**
 * Host keys live in DATA/ssh and are generated once, so the fingerprint clients pinned in
 * known_hosts never changes across restarts. ed25519 is what modern clients pick; RSA (3072 bits,
 * signed with rsa-sha2-*) is there for old clients. Files are written 0600 via a temp name + rename,
 * so a crash mid-write never leaves a truncated key that would be "regenerated" on the next start.
 *
 * Generating RSA-3072 takes 1-3 s here, so on a first start it runs in the background: the server
 * listens with ed25519 at once and adds RSA when it is ready (see server.ts).
 */
import { access, chmod, mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import ssh2 from 'ssh2';
import { isAlive } from '../../src/store/owner.js';

const { utils } = ssh2;

interface KeySpec {
  file: string;
  /** May the server start before this key exists (slow to generate, not needed by modern clients). */
  background: boolean;
  generate(): Promise<{ private: string; public: string }>;
}

const generate = promisify(utils.generateKeyPair) as (
  type: 'ed25519' | 'rsa',
  opts: { bits?: number; comment?: string },
) => Promise<{ private: string; public: string }>;

const SPECS: KeySpec[] = [
  { file: 'ssh_host_ed25519_key', background: false, generate: () => generate('ed25519', { comment: 'treegate' }) },
  { file: 'ssh_host_rsa_key', background: true, generate: () => generate('rsa', { bits: 3072, comment: 'treegate' }) },
];

async function writePrivate(path: string, text: string, mode: number): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await rm(tmp, { force: true });
  const fh = await open(tmp, 'wx', mode);
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
}

function usable(privateKey: Buffer | string): boolean {
  const parsed = utils.parseKey(privateKey);
  return !(parsed instanceof Error) && !Array.isArray(parsed) && parsed.isPrivateKey();
}

/**
 * ssh2 1.17's generator occasionally (~1 in 30 ed25519 keys, measured) writes a key its own parser
 * rejects as "Malformed OpenSSH private key"; such a key would stop the server, so draw again.
 */
async function generateValid(spec: KeySpec): Promise<{ private: string; public: string }> {
  for (let i = 0; i < 10; i++) {
    const pair = await spec.generate();
    if (usable(pair.private)) return pair;
  }
  throw new Error(`could not generate a usable ${spec.file}`);
}

async function loadOne(dir: string, spec: KeySpec, log: Logger, signal?: AbortSignal): Promise<Buffer> {
  const path = join(dir, spec.file);
  try {
    const data = await readFile(path);
    if (usable(data)) {
      await chmod(path, 0o600);
      return data;
    }
    // Unusable key (AList regenerates too); keep the bad file for the operator to inspect.
    const aside = `${path}.invalid-${Date.now()}`;
    await rename(path, aside);
    log.warn({ path, aside }, 'SFTP host key unreadable: moved aside, generating a new one');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const pair = await generateValid(spec);
  // Closed meanwhile: write nothing (the data dir may be on its way out); the next start generates.
  signal?.throwIfAborted();
  await writePrivate(path, pair.private, 0o600);
  await writePrivate(`${path}.pub`, pair.public + '\n', 0o644);
  log.info({ path }, 'generated SFTP host key');
  return Buffer.from(pair.private);
}

export interface HostKeys {
  /** Keys to start with: every key already on disk, plus ed25519 (generated now if missing). */
  initial: Buffer[];
  /** All keys, once the background ones are generated; undefined when `initial` is complete. */
  complete?: Promise<Buffer[]>;
}

/**
 * Remove the temp files (a private key each) a process killed mid-write left: writePrivate only
 * clears its own pid's. Only `<key file>.tmp-<pid>` of a dead pid.
 */
async function sweepTemp(dir: string): Promise<void> {
  for (const n of await readdir(dir)) {
    const m = /^(.+)\.tmp-(\d+)$/.exec(n);
    if (m && SPECS.some((s) => s.file === m[1]) && Number(m[2]) !== process.pid && !isAlive(Number(m[2]))) await rm(join(dir, n), { force: true });
  }
}

const exists = (path: string) => access(path).then(() => true, () => false);

/** The host private keys (OpenSSH format), generated on first use. */
export async function loadHostKeys(dataDir: string, log: Logger, signal?: AbortSignal): Promise<HostKeys> {
  const dir = join(dataDir, 'ssh');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await sweepTemp(dir);
  const initial: Buffer[] = [];
  const pending: KeySpec[] = [];
  for (const spec of SPECS) {
    if (spec.background && !(await exists(join(dir, spec.file)))) pending.push(spec);
    else initial.push(await loadOne(dir, spec, log));
  }
  if (!pending.length) return { initial };
  const complete = (async () => {
    const later: Buffer[] = [];
    for (const spec of pending) later.push(await loadOne(dir, spec, log, signal));
    return [...initial, ...later];
  })();
  return { initial, complete };
}
