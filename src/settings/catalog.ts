/**
 * Every setting treegate knows, with AList's defaults, groups and flags (alist-compat §5, §8).
 * flag: 0 public, 1 private, 2 readonly, 3 deprecated. Public and readonly items are served by
 * /api/public/settings. Values are always strings; `type` drives validation on save.
 */
export type SettingType = 'string' | 'text' | 'number' | 'bool' | 'select' | 'json';

export interface SettingDef {
  key: string;
  default: string;
  type: SettingType;
  group: number;
  flag: 0 | 1 | 2 | 3;
  options?: string;
  help?: string;
}

export const GROUP = { SINGLE: 0, SITE: 1, STYLE: 2, PREVIEW: 3, GLOBAL: 4, OFFLINE_DOWNLOAD: 5, INDEX: 6, SSO: 7, LDAP: 8, S3: 9, FTP: 10, TRAFFIC: 11 } as const;
export const FLAG = { PUBLIC: 0, PRIVATE: 1, READONLY: 2, DEPRECATED: 3 } as const;

// TODO(settings owner): complete the catalogue (the foundation issue's settings work).
export const CATALOG: SettingDef[] = [
  { key: 'version', default: 'dev', type: 'string', group: GROUP.SITE, flag: FLAG.READONLY },
  { key: 'site_title', default: 'AList', type: 'string', group: GROUP.SITE, flag: FLAG.PUBLIC },
  { key: 'announcement', default: '### repo\nhttps://github.com/alist-org/alist', type: 'text', group: GROUP.SITE, flag: FLAG.PUBLIC },
  { key: 'sign_all', default: 'true', type: 'bool', group: GROUP.GLOBAL, flag: FLAG.PRIVATE },
  { key: 'link_expiration', default: '0', type: 'number', group: GROUP.GLOBAL, flag: FLAG.PRIVATE },
  { key: 'search_index', default: 'none', type: 'select', options: 'database,none', group: GROUP.INDEX, flag: FLAG.PUBLIC },
];
