/**
 * Site settings: the catalogue's defaults overlaid with stored values, held in memory for cheap
 * synchronous reads on hot paths (signing, listing) and written through the store.
 *
 * Stored keys the catalogue does not know (left by an older version, or created through
 * /api/admin/setting/save as AList allows) are kept and reported as deprecated, so an admin can
 * delete them, exactly like AList marks settings it no longer defines.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { VfsError } from '../errors.js';
import type { Store } from '../store/store.js';
import { CATALOG, FLAG, GROUP, type SettingDef } from './catalog.js';

/** The admin API's item shape (`{key, value, help, type, options, group, flag, index}`). */
export interface SettingItem {
  key: string;
  value: string;
  help: string;
  type: string;
  options: string;
  group: number;
  flag: number;
  index: number;
}

const BY_KEY = new Map(CATALOG.map((d) => [d.key, d]));
const INDEX = new Map(CATALOG.map((d, i) => [d.key, i]));

/** Byte-order comparison (Go sorts map keys this way; localeCompare would not). */
const byKey = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export class Settings {
  private values: Record<string, string> = {};
  /** Stored keys that the catalogue does not define. */
  private extra = new Set<string>();
  private readonly listeners = new Set<() => void>();

  private constructor(private readonly store: Store, private readonly version: string) {}

  static async load(store: Store, version: string): Promise<Settings> {
    const s = new Settings(store, version);
    await s.reload();
    const stored = await store.settings.all();
    if (!stored.token) await s.save({ token: newApiToken() }); // the admin API token and sign key
    store.onExternalChange(() => void s.reload().then(() => s.changed()));
    return s;
  }

  /** Be told after values changed (a save here, or another process's write to the store). */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  private changed(): void {
    for (const l of this.listeners) l();
  }

  private async reload(): Promise<void> {
    const stored = await this.store.settings.all();
    const values: Record<string, string> = {};
    for (const d of CATALOG) values[d.key] = d.default;
    Object.assign(values, stored, { version: this.version });
    this.values = values;
    this.extra = new Set(Object.keys(stored).filter((k) => !BY_KEY.has(k)));
  }

  get(key: string): string {
    return this.values[key] ?? '';
  }

  bool(key: string): boolean {
    return this.get(key) === 'true';
  }

  number(key: string): number {
    const n = Number(this.get(key));
    return Number.isFinite(n) ? n : 0;
  }

  def(key: string): SettingDef | undefined {
    return BY_KEY.get(key);
  }

  /** Whether the key exists (in the catalogue or stored). */
  has(key: string): boolean {
    return BY_KEY.has(key) || this.extra.has(key);
  }

  /** Public and readonly settings, keys in byte order (AList's map order), all strings. */
  publicValues(): Record<string, string> {
    const out: Record<string, string> = {};
    const keys = CATALOG.filter((d) => d.flag === FLAG.PUBLIC || d.flag === FLAG.READONLY).map((d) => d.key);
    for (const k of keys.sort(byKey)) out[k] = this.get(k);
    return out;
  }

  /** One item, or undefined for an unknown key. */
  item(key: string): SettingItem | undefined {
    const d = BY_KEY.get(key);
    if (d) {
      return { key, value: this.get(key), help: d.help ?? '', type: d.type, options: d.options ?? '', group: d.group, flag: d.flag, index: INDEX.get(key)! };
    }
    if (!this.extra.has(key)) return undefined;
    return { key, value: this.get(key), help: '', type: 'string', options: '', group: GROUP.SINGLE, flag: FLAG.DEPRECATED, index: CATALOG.length };
  }

  /** All items ordered by index (catalogue order, unknown stored keys last, by key). */
  items(): SettingItem[] {
    return [...CATALOG.map((d) => d.key), ...[...this.extra].sort(byKey)].map((k) => this.item(k)!);
  }

  /**
   * Validate and store values, all or nothing. Readonly keys cannot be changed; unknown keys are
   * accepted (AList's save is an upsert). Throws VfsError INVALID with a message naming the key.
   */
  async save(values: Record<string, string>): Promise<void> {
    for (const [k, v] of Object.entries(values)) validateSetting(k, v, BY_KEY.get(k));
    await this.store.settings.setMany(values);
    Object.assign(this.values, values);
    for (const k of Object.keys(values)) if (!BY_KEY.has(k)) this.extra.add(k);
    this.changed();
  }

  /** Remove a deprecated (unknown) stored key. Returns false when there is no such stored key. */
  async deleteDeprecated(key: string): Promise<boolean> {
    if (BY_KEY.has(key) || !this.extra.has(key)) return false;
    await this.store.settings.delete(key);
    this.extra.delete(key);
    delete this.values[key];
    return true;
  }

  /** A new admin API token; signs made with the old one stop verifying. */
  async resetToken(): Promise<string> {
    const token = newApiToken();
    await this.save({ token });
    return token;
  }
}

/** Throws VfsError('INVALID') when `v` is not acceptable for the setting `k`. */
export function validateSetting(k: string, v: unknown, d: SettingDef | undefined): void {
  const bad = (why: string) => new VfsError('INVALID', `setting ${k}: ${why}`);
  if (typeof v !== 'string') throw bad('value must be a string');
  if (k === '') throw new VfsError('INVALID', 'setting key must not be empty');
  if (!d) return;
  if (d.flag === FLAG.READONLY) throw new VfsError('INVALID', `setting ${k} is read-only`);
  if (k === 'token' && v.length < 16) throw bad('must be at least 16 characters');
  switch (d.type) {
    case 'number':
      // 400 digits pass the pattern but are Infinity: read back as 0 (settings.number), a
      // qbittorrent_seedtime of 1e400 minutes meant no seeding at all.
      if (!/^-?\d+(\.\d+)?$/.test(v.trim()) || !Number.isFinite(Number(v))) throw bad('not a number');
      if (d.range && !(Number.isInteger(Number(v)) && Number(v) >= d.range[0] && Number(v) <= d.range[1])) {
        throw bad(`must be a whole number from ${d.range[0]} to ${d.range[1]}`);
      }
      break;
    case 'bool':
      if (v !== 'true' && v !== 'false') throw bad('must be true or false');
      break;
    case 'select':
      if (v !== '' && !(d.options ?? '').split(',').includes(v)) throw bad(`must be one of ${d.options}`);
      break;
    default:
      break;
  }
  if (d.check === 'json_object' || d.check === 'json_array') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(v);
    } catch {
      throw bad('not valid JSON');
    }
    const isArray = Array.isArray(parsed);
    if (d.check === 'json_array' ? !isArray : isArray || typeof parsed !== 'object' || parsed === null) {
      throw bad(d.check === 'json_array' ? 'must be a JSON array' : 'must be a JSON object');
    }
  }
  if (d.check === 'front_regex_lines') {
    for (const line of v.split('\n').map((l) => l.trim()).filter(Boolean)) {
      if (!frontEndCompiles(line)) throw bad(`the web front end cannot compile ${line} (one /regex/flags per line)`);
    }
  }
  if (d.check === 'regex_lines') {
    for (const line of v.split('\n').map((l) => l.trim()).filter(Boolean)) {
      if (!regexCompiles(line)) throw bad(`invalid regular expression: ${line}`);
    }
  }
}

/**
 * A privacy_regs line, as JavaScript or in Go's syntax as AList writes it. AList's own default ends
 * in `(?U)access_token=(.*)&`, which JavaScript refuses: an AList backup restored through the web
 * front end (one save of every setting, all or nothing) was refused whole, no setting restored.
 * Go's flag groups and `(?P<name>` are rewritten to JavaScript before a second try.
 */
function regexCompiles(line: string): boolean {
  const fromGo = line.replace(/\(\?[imsU-]+\)/g, '').replace(/\(\?[imsU-]+:/g, '(?:').replace(/\(\?P</g, '(?<');
  for (const source of [line, fromGo]) {
    try {
      new RegExp(source);
      return true;
    } catch {
      // try the next form
    }
  }
  return false;
}

/**
 * Does AList's web front end compile this hide_files line? It takes `/re/flags` apart with a
 * replace and calls `new RegExp(re, flags)` without catching, so one bad line throws in every
 * folder view. A line not in that form becomes `new RegExp(line, line)` there (the replace leaves it
 * whole), which this mirrors.
 */
function frontEndCompiles(line: string): boolean {
  const literal = /^\/(.*)\/([a-z]*)$/;
  try {
    new RegExp(line.replace(literal, '$1'), line.replace(literal, '$2'));
    return true;
  } catch {
    return false;
  }
}

export function newApiToken(): string {
  return `alist-${randomUUID()}${randomBytes(48).toString('base64url').slice(0, 64)}`;
}
