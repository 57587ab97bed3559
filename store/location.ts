/**
 * Where a store lives: a directory, or `s3://bucket/prefix` with a local
 * directory for what stays on this host. One parser for `--store`,
 * `$SLUICE_STORE` and the SDK, so a value meant as S3 is never taken for a
 * path (which would quietly create `./s3:/b/p`).
 */
import { createHash } from 'node:crypto';
import { homedir, tmpdir, userInfo } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { BadOptionError } from '../engine/protocol/errors.js';

/** The default store directory, relative to the working directory. */
export const DEFAULT_STORE_DIR = '.sluice';

/** A store in a local directory. */
export interface DirectoryLocation {
  readonly kind: 'directory';
  /** Absolute path of the store's root directory. */
  readonly dir: string;
}

/** A store in an S3 bucket (any S3-compatible service). */
export interface S3Location {
  readonly kind: 's3';
  /** The bucket name, as S3 spells it (3-63 characters: lowercase letters, digits, dots, hyphens). */
  readonly bucket: string;
  /** The key prefix every object of the store starts with: empty, or segments joined by `/` with no trailing `/`. */
  readonly prefix: string;
  /** The canonical URL, `s3://bucket` or `s3://bucket/prefix`. */
  readonly url: string;
  /**
   * Absolute path of the local directory of this host's temporaries and
   * caches (by default in the user's cache directory: defaultLocalDir below).
   */
  readonly localDir: string;
}

/** Either kind of store location. */
export type StoreLocation = DirectoryLocation | S3Location;

/** Bucket names S3 accepts (the common rules of AWS, Ceph and MinIO; no IP-address names). */
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
/** A value is meant as S3 when it starts with the scheme, in any case: `S3:/x` must fail, not become a directory. */
const S3_SCHEME = /^s3:/i;
/** Characters a prefix may not hold: control characters, backslash, and URL syntax that would be silently lost. */
const BAD_PREFIX_CHARS = /[\u0000-\u001f\u007f\\?#]/;

/** True when `value` names an S3 location (it may still be malformed: {@link parseStoreLocation} says). */
function isS3Url(value: string): boolean {
  return S3_SCHEME.test(value);
}

function malformed(value: string, why: string): BadOptionError {
  return new BadOptionError(
    `store ${JSON.stringify(value)} is not a valid S3 location (${why}); expected s3://bucket/prefix`,
    {
      store: value,
    },
  );
}

// Empty, `.` and `..` segments are refused: S3 stores them literally, and two spellings would be two stores.
function parseS3Url(value: string): { bucket: string; prefix: string; url: string } {
  if (!value.startsWith('s3://')) throw malformed(value, 'it must start with s3:// in lowercase');
  const rest = value.slice('s3://'.length);
  const slash = rest.indexOf('/');
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  let prefix = slash === -1 ? '' : rest.slice(slash + 1);
  if (!BUCKET.test(bucket) || bucket.includes('..')) {
    throw malformed(value, `${JSON.stringify(bucket)} is not a bucket name`);
  }
  if (prefix.endsWith('/')) prefix = prefix.slice(0, -1);
  if (BAD_PREFIX_CHARS.test(prefix)) throw malformed(value, 'the prefix holds a control character, \\, ? or #');
  if (prefix !== '' && prefix.split('/').some((s) => s === '' || s === '.' || s === '..')) {
    throw malformed(value, 'the prefix has an empty, . or .. segment');
  }
  if (Buffer.byteLength(prefix) > 512) throw malformed(value, 'the prefix is longer than 512 bytes');
  return { bucket, prefix, url: prefix === '' ? `s3://${bucket}` : `s3://${bucket}/${prefix}` };
}

/**
 * `$XDG_CACHE_HOME/sluice/s3/<bucket>-<16 hex of endpoint, bucket, prefix>`
 * (else `~/.cache`, else a per-user temporary directory): a cache, since
 * nothing there is the only copy of anything shared; keyed by endpoint too,
 * since the same names on two services are two stores; never relative, which
 * would scatter caches over every directory sluice runs in.
 */
function defaultLocalDir(bucket: string, prefix: string, env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.SLUICE_STORE_LOCAL;
  if (explicit) return resolve(explicit);
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || 'aws';
  const key = createHash('sha256').update(`${endpoint}\n${bucket}\n${prefix}`).digest('hex').slice(0, 16);
  const name = join('sluice', 's3', `${bucket}-${key}`);
  if (env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME)) return join(env.XDG_CACHE_HOME, name);
  const home = safeHome();
  if (home) return join(home, '.cache', name);
  return join(tmpdir(), `sluice-${safeUid()}`, name);
}

function safeHome(): string | undefined {
  try {
    const h = homedir();
    return h && isAbsolute(h) ? h : undefined;
  } catch {
    return undefined;
  }
}

function safeUid(): string {
  try {
    return String(userInfo().uid);
  } catch {
    return 'user';
  }
}

/** An S3 URL (validated; `localDir` overrides its local directory) or a path; empty is `./.sluice`. */
export function parseStoreLocation(
  value: string,
  env: NodeJS.ProcessEnv = process.env,
  localDir?: string,
): StoreLocation {
  if (isS3Url(value)) {
    const { bucket, prefix, url } = parseS3Url(value);
    return {
      kind: 's3',
      bucket,
      prefix,
      url,
      localDir: localDir ? resolve(localDir) : defaultLocalDir(bucket, prefix, env),
    };
  }
  return { kind: 'directory', dir: resolve(value || DEFAULT_STORE_DIR) };
}

/** An explicit value, else `$SLUICE_STORE`, else `./.sluice`; empty counts as unset. */
export function resolveStoreLocation(explicit?: string, env: NodeJS.ProcessEnv = process.env): StoreLocation {
  return parseStoreLocation(explicit || env.SLUICE_STORE || DEFAULT_STORE_DIR, env);
}

/** How a location is written back: the directory, or the S3 URL (what `--store` would take). */
export function describeLocation(location: StoreLocation): string {
  return location.kind === 'directory' ? location.dir : location.url;
}
