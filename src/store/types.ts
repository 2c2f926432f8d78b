/**
 * Records kept by the store. Field names follow AList's JSON where the record is exposed by the API,
 * so REST can serialise them with little mapping. Times are ISO 8601 strings with offset.
 */

export interface UserRecord {
  id: number;
  username: string;
  /** scrypt over AList's static hash, hex (see auth/passwords.ts). */
  pwd_hash: string;
  salt: string;
  /** Unix seconds of the last password change; tokens carry it and die when it changes. */
  pwd_ts: number;
  base_path: string;
  role: number;
  disabled: boolean;
  permission: number;
  sso_id: string;
  /** Base32 TOTP secret, '' when 2FA is off. */
  otp_secret: string;
}

export interface SshKeyRecord {
  id: number;
  user_id: number;
  title: string;
  /** `SHA256:<base64 no padding>` exactly as `ssh-keygen -lf` prints. */
  fingerprint: string;
  /** The authorized_keys line as given (trimmed). */
  key_str: string;
  /** Base64 of the key's SSH wire blob: SFTP login compares blobs without re-parsing. */
  key_blob: string;
  added_time: string;
  last_used_time: string;
}

export interface MetaRecord {
  id: number;
  path: string;
  password: string;
  p_sub: boolean;
  write: boolean;
  w_sub: boolean;
  hide: string;
  h_sub: boolean;
  readme: string;
  r_sub: boolean;
  header: string;
  header_sub: boolean;
}

export interface StorageRecord {
  id: number;
  mount_path: string;
  order: number;
  driver: string;
  cache_expiration: number;
  /** Runtime only in AList; we persist the last known value too. `work`, `disabled` or the error. */
  status: string;
  /** Driver options as a JSON string (AList's wire form). */
  addition: string;
  remark: string;
  modified: string;
  disabled: boolean;
  disable_index: boolean;
  enable_sign: boolean;
  order_by: string;
  order_direction: string;
  extract_folder: string;
  web_proxy: boolean;
  webdav_policy: string;
  proxy_range: boolean;
  down_proxy_url: string;
}

export interface TaskRecord {
  id: string;
  kind: string;
  name: string;
  creator: string;
  creator_id: number;
  creator_role: number;
  state: number;
  status: string;
  progress: number;
  start_time: string | null;
  end_time: string | null;
  total_bytes: number;
  error: string;
  retry_count: number;
  /** Kind-specific resumable arguments (source, destination, URLs...). */
  args: Record<string, unknown>;
}

export interface RevokedToken {
  /** The token's jti. */
  id: string;
  /** Unix seconds; the entry can be purged after this. */
  exp: number;
  /** The token's user (absent in entries written by older versions). */
  uid?: number;
}
