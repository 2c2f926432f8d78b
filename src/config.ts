/**
 * Configuration, resolved once at start-up with the contract's precedence:
 * command-line flag > TREEGATE_* environment variable > DATA/config.json > config/default.json.
 * DATA/config.json is written with the defaults on first start (and a generated jwt_secret).
 *
 * Everything is checked before anything is created: a bad value is refused with a ConfigError whose
 * message names the key, where the value came from and why (one line, no stack), and then no data
 * dir, config file, admin or password exists yet.
 */
import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, realpath, stat } from 'node:fs/promises';
import { isIP } from 'node:net';
import { resolve, join } from 'node:path';
import pino from 'pino';
import defaults from '../config/default.json' with { type: 'json' };
import { basePathOf } from './site-url.js';
import { AtomicJsonFile } from './store/atomic-file.js';
import { linkNew } from './store/link-new.js';

/** Cross-origin browser access (AList's `cors` keys); see protocols/cors.ts. */
export interface CorsConfig {
  allow_origins: string[];
  allow_methods: string[];
  allow_headers: string[];
}

export interface Config {
  dataDir: string;
  configFile: string;
  http: { address: string; port: number; idle_timeout: number };
  sftp: { enable: boolean; address: string; port: number; idle_timeout: number };
  webdav: { enable: boolean };
  token_expires_in: number;
  jwt_secret: string;
  database: string;
  log: { level: string };
  site_url: string;
  dist_dir: string;
  temp_dir: string;
  trusted_proxies: string[];
  max_json_body: number;
  cors: CorsConfig;
  /** Things worth a warning once the logger exists (unknown keys in the config file). */
  warnings?: string[];
}

export type FileConfig = Omit<Config, 'dataDir' | 'configFile' | 'warnings'>;

export interface ConfigFlags {
  data?: string;
  config?: string;
}

/** A configuration value that is refused: the message names key, source and reason. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** env var → config key path; values are parsed by the type of the default. */
const ENV: Array<[string, string[]]> = [
  ['TREEGATE_HTTP_ADDRESS', ['http', 'address']],
  ['TREEGATE_HTTP_PORT', ['http', 'port']],
  ['TREEGATE_SFTP_ENABLE', ['sftp', 'enable']],
  ['TREEGATE_SFTP_ADDRESS', ['sftp', 'address']],
  ['TREEGATE_SFTP_PORT', ['sftp', 'port']],
  ['TREEGATE_WEBDAV_ENABLE', ['webdav', 'enable']],
  ['TREEGATE_TOKEN_EXPIRES_IN', ['token_expires_in']],
  ['TREEGATE_JWT_SECRET', ['jwt_secret']],
  ['TREEGATE_DATABASE', ['database']],
  ['TREEGATE_LOG_LEVEL', ['log', 'level']],
  ['TREEGATE_SITE_URL', ['site_url']],
  ['TREEGATE_DIST_DIR', ['dist_dir']],
  ['TREEGATE_TEMP_DIR', ['temp_dir']],
  ['TREEGATE_TRUSTED_PROXIES', ['trusted_proxies']],
];

/**
 * TREEGATE_* variables read elsewhere: the data dir (resolveDataDir), the first admin's password
 * (bootstrap.ts), and two switches for measuring and debugging (src/vfs/socket-sendfile.ts,
 * protocols/sftp/reused-reads.ts). Any other TREEGATE_* variable is a typo, named in a warning as
 * unknown config keys are.
 */
const OTHER_ENV = new Set(['TREEGATE_DATA', 'TREEGATE_ADMIN_PASSWORD', 'TREEGATE_SENDFILE', 'TREEGATE_DEBUG_POISON_READS']);

export const DEFAULT_CONFIG: FileConfig = defaults as FileConfig;

/** pino's levels, plus `silent` (nothing but the ready and first-start admin lines). */
export const LOG_LEVELS = [...Object.keys(pino.levels.values), 'silent'];

/** The shortest jwt_secret accepted (a generated one has 32 characters). */
const JWT_SECRET_MIN = 16;
/** Text config/example.config.json once carried as its jwt_secret: public, so never a key. */
const JWT_SECRET_PLACEHOLDERS = ['<generated on first start; changing it logs everyone out>'];

/** Keys whose values are never echoed in an error (a database URL may carry a password). */
const SECRET_KEYS = new Set(['jwt_secret', 'database']);

type Json = Record<string, unknown>;
/** Where each key's value came from: the config file's path or the env var's name. */
type Sources = Map<string, string>;

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function refuse(key: string, source: string, reason: string): ConfigError {
  return new ConfigError(`${key} (from ${source}): ${reason}`);
}

function got(key: string, v: unknown): string {
  return SECRET_KEYS.has(key) ? '' : `, got ${JSON.stringify(v)}`;
}

/**
 * Deep-merge the config file's `over` onto `base`, keeping only keys that exist in `base`, typed like
 * base's values. Unknown keys are collected (a `//` key is a comment).
 */
function merge(base: Json, over: Json, prefix: string, file: string, sources: Sources, unknown: string[]): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const key = prefix + k;
    // Own keys only: `in` also saw Object.prototype's (`constructor`, `toString`), so such a key was
    // refused as "expected a function" and stopped the start instead of being warned about.
    if (!Object.hasOwn(base, k)) {
      if (!k.startsWith('//')) unknown.push(key);
      continue;
    }
    const b = base[k];
    if (isObj(b)) {
      if (!isObj(v)) throw refuse(key, file, `expected an object${got(key, v)}`);
      out[k] = merge(b, v, `${key}.`, file, sources, unknown);
      continue;
    }
    if (Array.isArray(b)) {
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw refuse(key, file, `expected an array of strings${got(key, v)}`);
    } else if (typeof v !== typeof b) throw refuse(key, file, `expected a ${typeof b}${got(key, v)}`);
    out[k] = v;
    sources.set(key, file);
  }
  return out;
}

/**
 * `values` written over the config file's own object `file`, nested objects key by key: what the file
 * holds that the config does not use (a `//` comment, a mistyped key the warning names) is kept. A
 * shallow spread replaced each section whole, so saving a generated jwt_secret deleted them.
 */
function overlay(file: Json, values: Json): Json {
  const out: Json = { ...file };
  for (const [k, v] of Object.entries(values)) {
    const f = file[k];
    out[k] = isObj(v) && isObj(f) ? overlay(f, v) : v;
  }
  return out;
}

const PORT_KEYS = new Set(['http.port', 'sftp.port']);
const IDLE_KEYS = ['http.idle_timeout', 'sftp.idle_timeout'];
/** The longest idle timeout a Node timer can hold, in whole seconds. */
const MAX_IDLE_S = Math.floor((2 ** 31 - 1) / 1000);

function parseEnv(raw: string, like: unknown, name: string, key: string): unknown {
  if (typeof like === 'number') {
    // Decimal only: Number() would also take 0x4471, 0b1, 1e3 and Infinity.
    const ok = PORT_KEYS.has(key) ? /^\d+$/.test(raw) : /^[+-]?(\d+(\.\d*)?|\.\d+)$/.test(raw);
    if (!ok) throw refuse(key, name, `expected a decimal ${PORT_KEYS.has(key) ? 'integer' : 'number'}${got(key, raw)}`);
    return Number(raw);
  }
  if (typeof like === 'boolean') {
    if (/^(true|1|yes|on)$/i.test(raw)) return true;
    if (/^(false|0|no|off)$/i.test(raw)) return false;
    throw refuse(key, name, `expected true or false${got(key, raw)}`);
  }
  if (Array.isArray(like)) return raw.split(',').map((s) => s.trim()).filter(Boolean);
  return raw;
}

function setPath(obj: Json, path: string[], value: unknown): void {
  let o = obj;
  for (const k of path.slice(0, -1)) o = o[k] as Json;
  o[path[path.length - 1]!] = value;
}

function getPath(obj: Json, path: string[]): unknown {
  return path.reduce<unknown>((o, k) => (o as Json)[k], obj);
}

/** An address or CIDR range fastify's trustProxy (proxy-addr) accepts, or one of its named ranges. */
function isProxySpec(s: string): boolean {
  if (s === 'loopback' || s === 'linklocal' || s === 'uniquelocal') return true;
  const [addr, bits, ...more] = s.split('/');
  const v = isIP(addr!);
  if (!v || more.length) return false;
  if (bits === undefined) return true;
  if (/^\d+$/.test(bits)) return Number(bits) <= (v === 4 ? 32 : 128);
  return v === 4 && isIP(bits) === 4; // a netmask
}

/** Values whose type is right but which the server cannot use. */
function validate(cfg: FileConfig, sources: Sources): void {
  const src = (key: string) => sources.get(key) ?? 'built-in default';
  for (const key of PORT_KEYS) {
    const v = getPath(cfg as unknown as Json, key.split('.'));
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 65535) throw refuse(key, src(key), `must be 0-65535${got(key, v)}`);
  }
  // Node's timers hold at most 2^31-1 ms and fire after 1 ms when given more: an sftp.idle_timeout of
  // 30 days (meant as "practically never") closed every SFTP connection right after its login.
  for (const key of IDLE_KEYS) {
    const v = getPath(cfg as unknown as Json, key.split('.'));
    if (typeof v !== 'number' || !(v >= 1 && v <= MAX_IDLE_S)) throw refuse(key, src(key), `must be 1-${MAX_IDLE_S} seconds (about 24 days)${got(key, v)}`);
  }
  const hours = cfg.token_expires_in;
  if (!Number.isFinite(hours) || Math.round(hours * 3600) < 1)
    throw refuse('token_expires_in', src('token_expires_in'), `must be a positive number of hours (tokens would be born expired)${got('token_expires_in', hours)}`);
  if (hours * 3600 > 2 ** 52) throw refuse('token_expires_in', src('token_expires_in'), `must be at most 2^52 seconds in hours${got('token_expires_in', hours)}`);
  try {
    basePathOf(cfg.site_url);
  } catch (e) {
    throw refuse('site_url', src('site_url'), (e as Error).message);
  }
  if (!LOG_LEVELS.includes(cfg.log.level))
    throw refuse('log.level', src('log.level'), `must be one of ${LOG_LEVELS.join(', ')}${got('log.level', cfg.log.level)}`);
  for (const p of cfg.trusted_proxies) {
    if (!isProxySpec(p))
      throw refuse('trusted_proxies', src('trusted_proxies'), `${JSON.stringify(p)} is not an IP address, CIDR range, loopback, linklocal or uniquelocal`);
  }
  // The login tokens' HMAC key. Any token a user holds lets a short key be found offline, and the
  // example config's placeholder is public text: either would let anyone sign an admin token. Empty
  // means "generate one" (below). The value itself is never echoed (SECRET_KEYS).
  if (cfg.jwt_secret !== '') {
    if (JWT_SECRET_PLACEHOLDERS.includes(cfg.jwt_secret))
      throw refuse('jwt_secret', src('jwt_secret'), 'is the placeholder text of the example config: set it to "" (one is generated and saved) or to a random secret');
    if (cfg.jwt_secret.length < JWT_SECRET_MIN)
      throw refuse('jwt_secret', src('jwt_secret'), `must be at least ${JWT_SECRET_MIN} characters`);
  }
  if (cfg.database !== '')
    throw refuse('database', src('database'), 'only the embedded file store in DATA is supported: leave it empty (the value is not shown)');
  if (!Number.isInteger(cfg.max_json_body) || cfg.max_json_body < 1)
    throw refuse('max_json_body', src('max_json_body'), `must be a positive integer (bytes)${got('max_json_body', cfg.max_json_body)}`);
}

/** The data dir from flag > env > default, absolute. */
export function resolveDataDir(flags: ConfigFlags, env: NodeJS.ProcessEnv = process.env): string {
  // An empty TREEGATE_DATA (`TREEGATE_DATA=` in an env file) is unset, as for every other variable:
  // resolve('') is the working directory, which was then taken as DATA, chmod'ed 0700 and filled.
  return resolve(flags.data ?? (env.TREEGATE_DATA || './data'));
}

function dataDirSource(flags: ConfigFlags, env: NodeJS.ProcessEnv): string {
  return flags.data !== undefined ? '--data' : env.TREEGATE_DATA ? 'TREEGATE_DATA' : 'default ./data';
}

function errnoText(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  const why: Record<string, string> = {
    EACCES: 'permission denied', EPERM: 'permission denied', EISDIR: 'it is a directory', ENOTDIR: 'a part of the path is not a directory',
    EEXIST: 'it exists and is not a directory', EROFS: 'read-only file system',
  };
  return (err.code && why[err.code]) ?? err.message;
}

/**
 * temp_dir (empty: DATA/temp) is created when first needed, but one that exists must be a folder:
 * a file there stopped the start half-way (after the admin was created) with a bare ENOTDIR line.
 */
async function checkTempDir(tempDir: string, source: string): Promise<void> {
  if (!tempDir) return;
  const path = resolve(tempDir);
  const st = await stat(path).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return undefined;
    throw refuse('temp_dir', source, `${path}: ${errnoText(e)}`);
  });
  if (st && !st.isDirectory()) throw refuse('temp_dir', source, `${path} exists and is not a directory`);
}

/**
 * The folder this instance spools task data in. A temp_dir given in the config may be shared (one
 * /var/tmp for several instances), and each start sweeps its spool: a subfolder per data dir (the
 * same one after a restart, so a crash's leftovers are still swept) keeps one instance's start from
 * wiping another's uploads. Two servers never share a data dir (store/owner.ts).
 */
export function taskTempDir(cfg: Pick<Config, 'dataDir' | 'temp_dir'>): string {
  if (!cfg.temp_dir) return join(cfg.dataDir, 'temp');
  return join(resolve(cfg.temp_dir), `treegate-${createHash('sha256').update(cfg.dataDir).digest('hex').slice(0, 16)}`);
}

/** Read the config file: undefined when missing; a ConfigError naming the path for anything else. */
async function readConfigFile(file: string, source: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new ConfigError(`config file ${file} (from ${source}): cannot read it: ${errnoText(e)}`);
  }
}

/**
 * Write a new config file only if none exists (false when one does): made complete at once, 0600 and
 * fsynced (store/link-new.ts). Without hard links (exFAT, some FUSE mounts) it is written as before.
 */
async function createNew(file: string, data: Json): Promise<boolean> {
  const linked = await linkNew(file, (tmp) => new AtomicJsonFile<Json>(tmp).write(data));
  if (linked === 'no-links') await new AtomicJsonFile<Json>(file).write(data);
  return linked !== false;
}

/**
 * Load the configuration. Creates DATA (0700) and writes DATA/config.json with defaults when missing
 * (atomically, 0600); a missing jwt_secret is generated and saved there so tokens survive restarts.
 * Nothing is created when a value is refused. `retried`: the file another start created is read again.
 */
export async function loadConfig(flags: ConfigFlags = {}, env: NodeJS.ProcessEnv = process.env, retried = false): Promise<Config> {
  const dataDir = resolveDataDir(flags, env);
  const dataSource = dataDirSource(flags, env);
  const dataStat = await stat(dataDir).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return undefined;
    throw new ConfigError(`data dir ${dataDir} (from ${dataSource}): ${errnoText(e)}`);
  });
  if (dataStat && !dataStat.isDirectory()) throw new ConfigError(`data dir ${dataDir} (from ${dataSource}): exists and is not a directory`);

  const configFile = resolve(flags.config ?? join(dataDir, 'config.json'));
  const fileSource = flags.config !== undefined ? '--config' : 'DATA/config.json';
  const fileText = await readConfigFile(configFile, fileSource);
  let fromFile: Json = {};
  if (fileText !== undefined) {
    try {
      // A byte-order mark (Windows Notepad saves one) is no JSON, but the file is fine: skip it.
      fromFile = JSON.parse(fileText.replace(/^\uFEFF/, '')) as Json;
    } catch (e) {
      throw new ConfigError(`config file ${configFile} is not valid JSON: ${(e as Error).message}`);
    }
    if (!isObj(fromFile)) throw new ConfigError(`config file ${configFile} must hold a JSON object`);
  }
  const sources: Sources = new Map();
  const unknown: string[] = [];
  const base = structuredClone(DEFAULT_CONFIG) as unknown as Json;
  const fileMerged = merge(base, fromFile, '', configFile, sources, unknown);

  const merged = structuredClone(fileMerged);
  for (const [name, path] of ENV) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    const key = path.join('.');
    setPath(merged, path, parseEnv(raw, getPath(base, path), name, key));
    sources.set(key, name);
  }
  validate(merged as unknown as FileConfig, sources);
  await checkTempDir((merged as unknown as FileConfig).temp_dir, sources.get('temp_dir') ?? 'built-in default');

  // Only now, with every value accepted, is anything created.
  let step = 'create it';
  try {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    step = 'make it private (mode 0700)';
    await chmod(dataDir, 0o700);
  } catch (e) {
    throw new ConfigError(`data dir ${dataDir} (from ${dataSource}): cannot ${step}: ${errnoText(e)}`);
  }
  // An existing file is rewritten only to save a generated secret, and none is needed when
  // TREEGATE_JWT_SECRET gives one: a read-only config file (e.g. in /etc under ProtectSystem=strict)
  // without jwt_secret, with the secret in the environment, was refused for a write it did not need.
  if (fileText === undefined || (!fileMerged.jwt_secret && !merged.jwt_secret)) {
    // Persist defaults (and a secret) so the next start finds the same values.
    if (!fileMerged.jwt_secret) fileMerged.jwt_secret = randomBytes(24).toString('base64url');
    if (!merged.jwt_secret) merged.jwt_secret = fileMerged.jwt_secret;
    let created = true;
    try {
      // Through a symlink (DATA/config.json -> the operator's file in /etc), to its target: the atomic
      // write's rename replaced the link with a copy, and later edits of the target were ignored.
      const target = await realpath(configFile).catch(() => configFile);
      const data = overlay(fromFile, fileMerged);
      if (fileText === undefined && !retried) created = await createNew(target, data);
      else await new AtomicJsonFile<Json>(target).write(data);
    } catch (e) {
      const hint = fileText === undefined ? '' : ' (it has no jwt_secret to keep tokens valid across restarts: add one, or set TREEGATE_JWT_SECRET)';
      throw new ConfigError(`config file ${configFile} (from ${fileSource}): cannot write it: ${errnoText(e)}${hint}`);
    }
    // Another start created it meanwhile (two servers started at once on a new DATA): its values are
    // the ones. Each wrote its own generated secret over the other's, and the one that then won DATA
    // (store/owner.ts) could run with a secret the file no longer held: its tokens died at a restart.
    if (!created) return loadConfig(flags, env, true);
  }

  const cfg: Config = { ...(merged as unknown as FileConfig), dataDir, configFile };
  if (!cfg.sftp.address) cfg.sftp.address = cfg.http.address;
  const warnings: string[] = [];
  if (unknown.length) warnings.push(`config file ${configFile}: unknown keys ignored (typos?): ${unknown.join(', ')}`);
  const known = new Set([...ENV.map(([name]) => name), ...OTHER_ENV]);
  const unknownEnv = Object.keys(env).filter((name) => name.startsWith('TREEGATE_') && !known.has(name)).sort();
  if (unknownEnv.length) warnings.push(`environment: unknown variables ignored (typos?): ${unknownEnv.join(', ')}`);
  if (warnings.length) cfg.warnings = warnings;
  return cfg;
}
