/**
 * AList's wire shapes for file entries (alist-compat §9): the ObjResp of fs/list and fs/get, the type
 * integers, timestamps with a UTC offset, filename_char_mapping, and the `api_url` that raw_url and
 * thumbs are built on.
 */
import type { FastifyRequest } from 'fastify';
import type { Entry } from '../../src/vfs/types.js';
import type { Settings } from '../../src/settings/settings.js';
import { encodePathForUrl } from '../../src/paths.js';
import type { ThumbSource } from '../../drivers/types.js';

/** AList's object type integers (internal/conf/const.go). */
export const OBJ_TYPE = { UNKNOWN: 0, FOLDER: 1, VIDEO: 2, AUDIO: 3, TEXT: 4, IMAGE: 5 } as const;

/** Defaults of the *_types settings, used when the setting is absent from the catalogue. */
const TYPE_DEFAULTS: Record<string, string> = {
  audio_types: 'mp3,flac,ogg,m4a,wav,opus,wma',
  video_types: 'mp4,mkv,avi,mov,rmvb,webm,flv,m3u8',
  image_types: 'jpg,tiff,jpeg,png,gif,bmp,svg,ico,swf,webp',
  text_types: 'txt,htm,html,xml,java,properties,sql,js,md,json,conf,ini,vue,php,py,bat,gitignore,yml,go,sh,c,cpp,h,hpp,tsx,vtt,srt,ass,rs,lrc',
  proxy_types: 'm3u8,url',
};

/** A setting with AList's default when the catalogue does not (yet) define it. */
export function settingOr(settings: Settings, key: string, fallback: string): string {
  return settings.def(key) ? settings.get(key) : fallback;
}

export function typeList(settings: Settings, key: keyof typeof TYPE_DEFAULTS & string): string[] {
  return settingOr(settings, key, TYPE_DEFAULTS[key] ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
}

export function extOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot < 0 ? '' : name.slice(dot + 1).toLowerCase();
}

/** The type integer from a name alone (audio, then video, image, text), as fs/get computes it. */
export function typeOfName(settings: Settings, name: string): number {
  const ext = extOf(name);
  if (!ext) return OBJ_TYPE.UNKNOWN;
  if (typeList(settings, 'audio_types').includes(ext)) return OBJ_TYPE.AUDIO;
  if (typeList(settings, 'video_types').includes(ext)) return OBJ_TYPE.VIDEO;
  if (typeList(settings, 'image_types').includes(ext)) return OBJ_TYPE.IMAGE;
  if (typeList(settings, 'text_types').includes(ext)) return OBJ_TYPE.TEXT;
  return OBJ_TYPE.UNKNOWN;
}

/** What a thumbnail of a file is made of, by its type (typeOfName): a picture, a video frame, or neither. */
export function thumbSourceOf(settings: Settings, name: string): ThumbSource {
  const type = typeOfName(settings, name);
  return type === OBJ_TYPE.IMAGE ? 'image' : type === OBJ_TYPE.VIDEO ? 'video' : undefined;
}

const pad = (n: number, w = 2) => String(Math.trunc(Math.abs(n))).padStart(w, '0');

/**
 * A time as AList's JSON writes it: Go's RFC3339Nano in the server's local zone. The fraction has
 * no trailing zeros (none at all on a whole second) and a zero offset is `Z`, e.g.
 * `2024-05-01T12:34:56.12+02:00`, `2021-03-04T05:06:07Z`; the zero time (and anything before
 * year 1) is `0001-01-01T00:00:00Z`. Times here have millisecond precision (AList shows a Local
 * file's nanoseconds). It printed `.000+00:00` always, which no AList server sends.
 */
export function formatTime(d: Date | undefined): string {
  if (!d || Number.isNaN(d.getTime()) || d.getTime() <= -62135596800000) return '0001-01-01T00:00:00Z';
  const off = -d.getTimezoneOffset();
  const zone = off === 0 ? 'Z' : `${off > 0 ? '+' : '-'}${pad(off / 60)}:${pad(off % 60)}`;
  const frac = d.getMilliseconds() ? '.' + pad(d.getMilliseconds(), 3).replace(/0+$/, '') : '';
  return (
    `${pad(d.getFullYear(), 4)}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` +
    `${frac}${zone}`
  );
}

/** filename_char_mapping (JSON `{from: to}`, default `{"/": "|"}`) applied to a listed name. */
export function nameMapper(settings: Settings): (name: string) => string {
  let map: Record<string, unknown> = { '/': '|' };
  try {
    const raw = settingOr(settings, 'filename_char_mapping', '{"/": "|"}');
    const parsed: unknown = JSON.parse(raw);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) map = parsed as Record<string, unknown>;
  } catch {
    /* a broken setting leaves names untouched rather than failing every listing */
  }
  const pairs = Object.entries(map).filter((p): p is [string, string] => p[0] !== '' && typeof p[1] === 'string');
  if (!pairs.length) return (n) => n;
  // One pass, each character of the name replaced at most once (as Go's strings.Replacer does):
  // applying the pairs one after another let every pair re-expand what the ones before it wrote,
  // so a mapping such as {"a": "aaa…", "aa": "aaa…"} grew a name past what a string can hold and
  // every listing of its folder failed with an internal error.
  return (n) => {
    let out = '';
    for (let i = 0; i < n.length; ) {
      const hit = pairs.find(([from]) => n.startsWith(from, i));
      out += hit ? hit[1] : n[i];
      i += hit ? hit[0].length : 1;
    }
    return out;
  };
}

export interface ObjResp {
  name: string;
  size: number;
  is_dir: boolean;
  modified: string;
  created: string;
  sign: string;
  thumb: string;
  type: number;
  hashinfo: string;
  hash_info: Record<string, string> | null;
}

/**
 * AList's Local `thumb`: `<api_url>/d<escaped path>?type=thumb&sign=<sign>` for an image or a video of
 * a storage that makes thumbnails (Entry.hasThumb). The sign is the entry's own (the one its /d link
 * takes), never one made for the thumbnail alone: a sign opens the path past its password (download.ts).
 */
function thumbOf(e: Entry, type: number, sign: string, api: string | undefined): string {
  if (e.thumb) return e.thumb;
  if (!e.hasThumb || api === undefined || (type !== OBJ_TYPE.IMAGE && type !== OBJ_TYPE.VIDEO)) return '';
  return `${api}/d${encodePathForUrl(e.vpath)}?type=thumb&sign=${encodeURIComponent(sign)}`;
}

/**
 * One entry as AList serialises it. `sign` is the sign for files (empty for folders and when no sign
 * is required); `listType` true gives folders type 1 (list/search), false types by name (fs/get);
 * `api` (apiUrl) is what thumbnail addresses start with.
 */
export function toObjResp(e: Entry, o: { sign: string; settings: Settings; mapName: (n: string) => string; listType: boolean; api?: string }): ObjResp {
  const hashes = e.hashes && Object.keys(e.hashes).length ? Object.fromEntries(Object.entries(e.hashes).sort(([a], [b]) => a.localeCompare(b))) : null;
  const type = o.listType && e.isDir ? OBJ_TYPE.FOLDER : typeOfName(o.settings, e.name);
  return {
    name: o.mapName(e.name),
    size: e.isDir ? 0 : e.size,
    is_dir: e.isDir,
    // `/` without a storage is AList's `root` with Go's zero time; the VFS gives it the Unix epoch,
    // which WebDAV and SFTP clients can show (Windows' FILETIME starts in 1601, not year 1).
    modified: formatTime(e.virtual && e.vpath === '/' ? undefined : e.modified),
    created: formatTime(e.created),
    sign: e.isDir ? '' : o.sign,
    thumb: thumbOf(e, type, o.sign, o.api),
    type,
    hashinfo: hashes ? JSON.stringify(hashes) : 'null',
    hash_info: hashes,
  };
}

/**
 * AList's api_url: the `site_url` config when it is absolute, else scheme + host + site_url's path.
 * Unlike AList, X-Forwarded-Host / X-Forwarded-Proto count only from configured trusted proxies
 * (fastify's request.host / request.protocol), like X-Forwarded-For (decision 3). No trailing slash.
 */
export function apiUrl(req: FastifyRequest, siteUrl: string): string {
  if (/^https?:\/\//i.test(siteUrl)) return siteUrl.replace(/\/+$/, '');
  const proto = req.protocol === 'https' ? 'https' : 'http';
  const host = req.host || 'localhost';
  const path = ('/' + siteUrl).replace(/\/+/g, '/').replace(/\/$/, '');
  return `${proto}://${host}${path}`;
}
