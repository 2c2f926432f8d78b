/**
 * Option handling shared by every driver: AList's `driver/info` template items and the typed,
 * validated options object built from a storage's `addition` JSON. Both are derived from the one
 * `options` list on a DriverDefinition, so they cannot drift apart.
 */
import { VfsError } from '../src/errors.js';
import type { DriverConfigFlags, DriverDefinition, OptionSpec, OptionType, OptionValues } from './types.js';

/**
 * A driver's AList `config` record: AList's zero values (all flags false, default_root `/`, no
 * alert) with the given flags set, so each definition states only what differs.
 */
export function configFlags(name: string, set: Partial<Omit<DriverConfigFlags, 'name'>> = {}): DriverConfigFlags {
  return {
    name, local_sort: false, only_local: false, only_proxy: false, no_cache: false, no_upload: false, need_ms: false,
    default_root: '/', alert: '', ...set,
  };
}

/** One AList config item (`common` or `additional`), serialised verbatim by the REST adapter. */
export interface TemplateItem {
  name: string;
  type: OptionType;
  default: string;
  options: string;
  required: boolean;
  help: string;
}

/** AList's `{common, additional, config}` shape for one driver. */
export interface DriverTemplate {
  common: TemplateItem[];
  additional: TemplateItem[];
  config: DriverConfigFlags;
}

const item = (name: string, type: OptionType, extra: Partial<TemplateItem> = {}): TemplateItem => ({
  name, type, default: '', options: '', required: false, help: '', ...extra,
});

/**
 * The option as it really applies: `root_folder_path` / `root_folder_id` without an explicit default
 * take the driver's default_root and are required iff that is non-empty (AList's rule).
 */
export function effectiveSpec(config: DriverConfigFlags, spec: OptionSpec): OptionSpec {
  if ((spec.name === 'root_folder_path' || spec.name === 'root_folder_id') && spec.default === undefined) {
    return { ...spec, default: config.default_root, required: spec.required ?? config.default_root !== '' };
  }
  return spec;
}

/**
 * The `common` items, generated from the config flags in AList's order (alist-compat §6).
 * `proxyRangeOption` is DriverDefinition.proxyRangeOption (AList's hidden proxy_range_option).
 */
export function commonItems(c: DriverConfigFlags, proxyRangeOption = false): TemplateItem[] {
  const proxyOnly = c.only_proxy || c.only_local;
  const out: TemplateItem[] = [
    item('mount_path', 'string', { required: true, help: 'The path you want to mount to, it is unique and cannot be repeated' }),
    item('order', 'number', { help: 'use to sort' }),
    item('remark', 'text'),
  ];
  if (!c.no_cache) {
    out.push(item('cache_expiration', 'number', { default: '30', required: true, help: 'The cache expiration time for this storage' }));
  }
  if (proxyOnly) {
    out.push(item('webdav_policy', 'select', { default: 'native_proxy', options: 'use_proxy_url,native_proxy', required: true }));
  } else {
    out.push(item('web_proxy', 'bool'));
    out.push(item('webdav_policy', 'select', { default: '302_redirect', options: '302_redirect,use_proxy_url,native_proxy', required: true }));
    // AList adds it only here: a proxy-only driver never offers range-split proxying.
    if (proxyRangeOption) out.push(item('proxy_range', 'bool', { help: 'Need to enable proxy' }));
  }
  out.push(item('down_proxy_url', 'text'));
  if (c.local_sort) {
    out.push(item('order_by', 'select', { options: 'name,size,modified' }));
    out.push(item('order_direction', 'select', { options: 'asc,desc' }));
  }
  out.push(item('extract_folder', 'select', { options: 'front,back' }));
  out.push(item('disable_index', 'bool', { default: 'false', required: true }));
  out.push(item('enable_sign', 'bool', { default: 'false', required: true }));
  return out;
}

export function additionalItems(def: DriverDefinition): TemplateItem[] {
  return def.options.map((raw) => {
    const s = effectiveSpec(def.config, raw);
    return item(s.name, s.type, { default: s.default ?? '', options: s.options ?? '', required: s.required ?? false, help: s.help ?? '' });
  });
}

export function templateOf(def: DriverDefinition): DriverTemplate {
  return { common: commonItems(def.config, def.proxyRangeOption ?? false), additional: additionalItems(def), config: { ...def.config } };
}

function bad(msg: string): VfsError {
  return new VfsError('INVALID', msg);
}

/** A refused value as shown in the message: short, and never a failure of its own (deep nesting). */
function shown(v: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(v) ?? String(v);
  } catch {
    text = typeof v === 'object' ? 'a nested value' : String(v);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function coerce(spec: OptionSpec, raw: unknown): string | number | boolean {
  switch (spec.type) {
    case 'number': {
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
      if (!Number.isFinite(n)) throw bad(`option ${spec.name} must be a number, got ${shown(raw)}`);
      return n;
    }
    case 'bool':
      if (typeof raw === 'boolean') return raw;
      if (raw === 'true' || raw === 'false') return raw === 'true';
      if (raw === '') return false;
      throw bad(`option ${spec.name} must be true or false, got ${shown(raw)}`);
    default:
      if (typeof raw === 'number' || typeof raw === 'boolean') return String(raw);
      if (typeof raw !== 'string') throw bad(`option ${spec.name} must be a string`);
      return raw;
  }
}

/**
 * Build the typed options for a driver from a storage's `addition` (JSON text or an object):
 * omitted keys get the declared default (unless formDefaultOnly), values are coerced to the declared type, unknown keys are
 * dropped. Throws VfsError('INVALID') naming the option for bad JSON, a missing required value, a
 * non-number, a non-bool or a select value outside its list.
 */
export function parseOptions<O extends readonly OptionSpec[]>(def: DriverDefinition<O>, addition: string | Record<string, unknown> | undefined): OptionValues<O> {
  let input: Record<string, unknown> = {};
  if (typeof addition === 'string' && addition.trim() !== '') {
    try {
      input = JSON.parse(addition) as Record<string, unknown>;
    } catch (e) {
      throw bad(`addition is not valid JSON: ${(e as Error).message}`);
    }
    if (input === null || typeof input !== 'object' || Array.isArray(input)) throw bad('addition must be a JSON object');
  } else if (addition && typeof addition === 'object') {
    input = addition;
  }
  const out: Record<string, string | number | boolean> = {};
  for (const raw of def.options) {
    const spec = effectiveSpec(def.config, raw);
    const given = input[spec.name];
    const fallback = spec.formDefaultOnly ? '' : spec.default ?? (spec.type === 'number' ? '0' : '');
    const value = coerce(spec, given === undefined || given === null ? fallback : given);
    if (spec.required && !spec.formDefaultOnly && spec.type !== 'bool' && value === '') throw bad(`option ${spec.name} is required`);
    if (spec.type === 'select' && value !== '' && spec.options) {
      const allowed = spec.options.split(',');
      if (!allowed.includes(String(value))) throw bad(`option ${spec.name} must be one of ${spec.options}, got ${shown(value)}`);
    }
    out[spec.name] = value;
  }
  return out as OptionValues<O>;
}

/** The normalised `addition` JSON text: every option, in declared order, with its value. */
export function additionJson(def: DriverDefinition, values: Record<string, unknown>): string {
  const ordered: Record<string, unknown> = {};
  for (const s of def.options) ordered[s.name] = values[s.name];
  return JSON.stringify(ordered);
}
