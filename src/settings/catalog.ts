/**
 * Every setting treegate knows, with AList 3.45's defaults, groups and flags (alist-compat §5, §8).
 * flag: 0 public, 1 private, 2 readonly, 3 deprecated. Public and readonly items are served by
 * /api/public/settings. Values are always strings.
 *
 * `type` is what AList's front end renders (string, text, number, bool, select); `check` adds the
 * stricter validation a few text settings need on save (they hold JSON or regexes that the server
 * itself uses). The position in CATALOG is the item's `index` (the admin list order).
 */
export type SettingType = 'string' | 'text' | 'number' | 'bool' | 'select';

/**
 * Extra validation for text values: a JSON object/array, one JavaScript regex per line, or one
 * `/regex/flags` per line as AList's web front end reads hide_files.
 */
export type SettingCheck = 'json_object' | 'json_array' | 'regex_lines' | 'front_regex_lines';

export interface SettingDef {
  key: string;
  default: string;
  type: SettingType;
  group: number;
  flag: 0 | 1 | 2 | 3;
  options?: string;
  help?: string;
  check?: SettingCheck;
  /** Numbers: the whole numbers allowed (a value outside makes the feature misbehave, see each row). */
  range?: readonly [min: number, max: number];
}

export const GROUP = { SINGLE: 0, SITE: 1, STYLE: 2, PREVIEW: 3, GLOBAL: 4, OFFLINE_DOWNLOAD: 5, INDEX: 6, SSO: 7, LDAP: 8, S3: 9, FTP: 10, TRAFFIC: 11 } as const;
export const FLAG = { PUBLIC: 0, PRIVATE: 1, READONLY: 2, DEPRECATED: 3 } as const;

const LOGO = 'https://cdn.jsdelivr.net/gh/alist-org/logo@main/logo.svg';

// AList's default, tab-indented as AList writes it (the front end shows it in a text area).
const IFRAME_PREVIEWS = `{
\t"doc,docx,xls,xlsx,ppt,pptx": {
\t\t"Microsoft":"https://view.officeapps.live.com/op/view.aspx?src=$e_url",
\t\t"Google":"https://docs.google.com/gview?url=$e_url&embedded=true"
\t},
\t"pdf": {
\t\t"PDF.js":"https://alist-org.github.io/pdf.js/web/viewer.html?file=$e_url"
\t},
\t"epub": {
\t\t"EPUB.js":"https://alist-org.github.io/static/epub.js/viewer.html?url=$e_url"
\t}
}`;

// AList's privacy regexes are Go syntax; these are the JavaScript equivalents (IPv4, IPv6, access_token).
const PRIVACY_REGS = [
  String.raw`(?:(?:\d|[1-9]\d|1\d\d|2[0-4]\d|25[0-5])\.){3}(?:\d|[1-9]\d|1\d\d|2[0-4]\d|25[0-5])`,
  String.raw`(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|(?:[0-9a-fA-F]{1,4}:){1,7}:|:(?::[0-9a-fA-F]{1,4}){1,7}|(?:[0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}`,
  String.raw`access_token=(.*?)&`,
].join('\n');

const { SINGLE, SITE, STYLE, PREVIEW, GLOBAL, OFFLINE_DOWNLOAD, INDEX, SSO, LDAP, S3, TRAFFIC } = GROUP;
const { PUBLIC, PRIVATE, READONLY } = FLAG;

type Row = [key: string, value: string, type: SettingType, group: number, flag: 0 | 1 | 2 | 3, extra?: Partial<SettingDef>];

const ROWS: Row[] = [
  // site
  ['version', 'dev', 'string', SITE, READONLY, { help: "treegate's version; set at start-up" }],
  ['site_title', 'AList', 'string', SITE, PUBLIC],
  ['announcement', '### repo\nhttps://github.com/alist-org/alist', 'text', SITE, PUBLIC],
  ['pagination_type', 'all', 'select', SITE, PUBLIC, { options: 'all,pagination,load_more,auto_load_more' }],
  ['default_page_size', '30', 'number', SITE, PUBLIC, { range: [1, 10_000] }],
  ['allow_indexed', 'false', 'bool', SITE, PUBLIC],
  ['allow_mounted', 'true', 'bool', SITE, PUBLIC],
  ['robots_txt', 'User-agent: *\nAllow: /', 'text', SITE, PUBLIC],
  // style
  ['logo', LOGO, 'text', STYLE, PUBLIC],
  ['favicon', LOGO, 'string', STYLE, PUBLIC],
  ['main_color', '#1890ff', 'string', STYLE, PUBLIC],
  ['home_icon', '🏠', 'string', STYLE, PUBLIC],
  ['home_container', 'max_980px', 'select', STYLE, PUBLIC, { options: 'max_980px,hope_container' }],
  ['settings_layout', 'list', 'select', STYLE, PUBLIC, { options: 'list,responsive' }],
  // preview
  ['text_types', 'txt,htm,html,xml,java,properties,sql,js,md,json,conf,ini,vue,php,py,bat,gitignore,yml,go,sh,c,cpp,h,hpp,tsx,vtt,srt,ass,rs,lrc', 'text', PREVIEW, PRIVATE],
  ['audio_types', 'mp3,flac,ogg,m4a,wav,opus,wma', 'text', PREVIEW, PRIVATE],
  ['video_types', 'mp4,mkv,avi,mov,rmvb,webm,flv,m3u8', 'text', PREVIEW, PRIVATE],
  ['image_types', 'jpg,tiff,jpeg,png,gif,bmp,svg,ico,swf,webp', 'text', PREVIEW, PRIVATE],
  ['proxy_types', 'm3u8,url', 'text', PREVIEW, PRIVATE],
  ['proxy_ignore_headers', 'authorization,referer', 'text', PREVIEW, PRIVATE],
  ['external_previews', '{}', 'text', PREVIEW, PUBLIC, { check: 'json_object' }],
  ['iframe_previews', IFRAME_PREVIEWS, 'text', PREVIEW, PUBLIC, { check: 'json_object' }],
  ['audio_cover', 'https://jsd.nn.ci/gh/alist-org/logo@main/logo.svg', 'string', PREVIEW, PUBLIC],
  ['audio_autoplay', 'true', 'bool', PREVIEW, PUBLIC],
  ['video_autoplay', 'true', 'bool', PREVIEW, PUBLIC],
  ['preview_archives_by_default', 'true', 'bool', PREVIEW, PUBLIC],
  ['readme_autorender', 'true', 'bool', PREVIEW, PUBLIC],
  ['filter_readme_scripts', 'true', 'bool', PREVIEW, PUBLIC],
  // global
  ['hide_files', '/\\/README.md/i', 'text', GLOBAL, PUBLIC, { check: 'front_regex_lines' }],
  ['package_download', 'true', 'bool', GLOBAL, PUBLIC],
  ['customize_head', '', 'text', GLOBAL, PRIVATE],
  ['customize_body', '', 'text', GLOBAL, PRIVATE],
  // Bounded so the expiry stays a safe integer: past it every sign handed out fails `expire invalid`.
  ['link_expiration', '0', 'number', GLOBAL, PRIVATE, { help: 'hours; 0 = signs never expire', range: [0, 876_000] }],
  ['sign_all', 'true', 'bool', GLOBAL, PRIVATE],
  ['privacy_regs', PRIVACY_REGS, 'text', GLOBAL, PRIVATE, { check: 'regex_lines', help: 'one JavaScript regex per line; matches are masked in error messages' }],
  ['ocr_api', 'https://api.nn.ci/ocr/file/json', 'string', GLOBAL, PUBLIC],
  ['filename_char_mapping', '{"/": "|"}', 'text', GLOBAL, PUBLIC, { check: 'json_object' }],
  ['forward_direct_link_params', 'false', 'bool', GLOBAL, PUBLIC],
  ['ignore_direct_link_params', 'sign,alist_ts', 'string', GLOBAL, PUBLIC],
  ['webauthn_login_enabled', 'false', 'bool', GLOBAL, PUBLIC],
  // single
  ['token', '', 'string', SINGLE, PRIVATE, { help: 'admin API token and sign key; generated on first start' }],
  // offline download
  ['aria2_uri', 'http://localhost:6800/jsonrpc', 'string', OFFLINE_DOWNLOAD, PRIVATE],
  ['aria2_secret', '', 'string', OFFLINE_DOWNLOAD, PRIVATE],
  ['qbittorrent_url', 'http://admin:adminadmin@localhost:8080/', 'string', OFFLINE_DOWNLOAD, PRIVATE],
  ['qbittorrent_seedtime', '0', 'number', OFFLINE_DOWNLOAD, PRIVATE],
  ['transmission_uri', 'http://localhost:9091/transmission/rpc', 'string', OFFLINE_DOWNLOAD, PRIVATE],
  ['transmission_seedtime', '0', 'number', OFFLINE_DOWNLOAD, PRIVATE],
  ['offline_download_allow_private', 'false', 'bool', OFFLINE_DOWNLOAD, PRIVATE,
    { help: 'allow offline downloads from loopback, private and link-local addresses' }],
  // index
  ['search_index', 'none', 'select', INDEX, PUBLIC, { options: 'database,database_non_full_text,bleve,meilisearch,none' }],
  ['auto_update_index', 'false', 'bool', INDEX, PUBLIC],
  ['ignore_paths', '', 'text', INDEX, PRIVATE, { help: 'one path per line' }],
  ['max_index_depth', '20', 'number', INDEX, PRIVATE, { help: 'max depth of index', range: [0, 1000] }],
  ['index_progress', '{}', 'text', INDEX, PRIVATE, { check: 'json_object' }],
  // sso
  ['sso_login_enabled', 'false', 'bool', SSO, PUBLIC],
  ['sso_login_platform', '', 'select', SSO, PUBLIC, { options: 'Casdoor,Github,Microsoft,Google,Dingtalk,OIDC' }],
  ['sso_client_id', '', 'string', SSO, PRIVATE],
  ['sso_client_secret', '', 'string', SSO, PRIVATE],
  ['sso_compatibility_mode', 'false', 'bool', SSO, PUBLIC],
  // ldap
  ['ldap_login_enabled', 'false', 'bool', LDAP, PUBLIC],
  ['ldap_login_tips', 'login with ldap', 'string', LDAP, PUBLIC],
  ['ldap_server', '', 'string', LDAP, PRIVATE],
  ['ldap_manager_dn', '', 'string', LDAP, PRIVATE],
  ['ldap_manager_password', '', 'string', LDAP, PRIVATE],
  ['ldap_user_search_base', '', 'string', LDAP, PRIVATE],
  ['ldap_user_search_filter', '(uid=%s)', 'string', LDAP, PRIVATE],
  ['ldap_default_permission', '0', 'number', LDAP, PRIVATE],
  ['ldap_default_dir', '/', 'string', LDAP, PRIVATE],
  // s3 (the front end's S3 page)
  ['s3_buckets', '[]', 'string', S3, PRIVATE, { check: 'json_array' }],
  ['s3_access_key_id', '', 'string', S3, PRIVATE],
  ['s3_secret_access_key', '', 'string', S3, PRIVATE],
  // traffic: task worker counts and speed limits (-1 = unlimited)
  ['offline_download_task_threads_num', '4', 'number', TRAFFIC, PRIVATE, { range: [1, 64] }],
  ['offline_download_transfer_task_threads_num', '4', 'number', TRAFFIC, PRIVATE, { range: [1, 64] }],
  ['upload_task_threads_num', '4', 'number', TRAFFIC, PRIVATE, { range: [1, 64] }],
  ['copy_task_threads_num', '4', 'number', TRAFFIC, PRIVATE, { range: [1, 64] }],
  ['max_server_download_speed', '-1', 'number', TRAFFIC, PRIVATE, { help: 'KB/s; -1 = unlimited' }],
  ['max_server_upload_speed', '-1', 'number', TRAFFIC, PRIVATE, { help: 'KB/s; -1 = unlimited' }],
  // treegate's own: bounds what a SimpleHttp offline download may write to the temp folder.
  ['offline_download_max_size', '10737418240', 'number', OFFLINE_DOWNLOAD, PRIVATE, { help: 'bytes; 0 = unlimited' }],
];

export const CATALOG: readonly SettingDef[] = ROWS.map(([key, value, type, group, flag, extra]) => ({ key, default: value, type, group, flag, ...extra }));
