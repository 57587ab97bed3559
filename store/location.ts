/**
 * Where a store lives: a local directory, or an S3 bucket and key prefix
 * (`s3://bucket/prefix`) with a local directory beside it for what must stay
 * on this host (capture temporaries, copies of line indexes, the read
 * cache, mirrors of session records). One parser for `--store`, `$SLUICE_STORE` and the SDK's
 * `store` option, so a value meant as S3 is never taken for a path (which
 * would quietly create a directory `./s3:/b/p`).
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

/**
 * Parses `s3://bucket[/prefix]` into its bucket and prefix, or throws
 * {@link BadOptionError} (EBADOPTION) quoting the value. A trailing `/` is
 * dropped; empty, `.` and `..` segments are refused (S3 would store them
 * literally, and two spellings of one prefix would be two stores).
 */
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
 * The local directory of an S3 store, unless `$SLUICE_STORE_LOCAL` names one:
 * `$XDG_CACHE_HOME/sluice/s3/<bucket>-<16 hex>` (else `~/.cache/...`, else
 * the system temporary directory under a per-user name), the hex a hash of
 * the endpoint, bucket and prefix.
 *
 * A cache directory because nothing in it is the only copy of anything
 * shared: temporaries live for one publish, indexes are copies of objects,
 * and pins protect this host's in-flight work only. Keyed by endpoint as
 * well as bucket and prefix, since the same names on two services are two
 * stores; hashed, since a prefix may be any length and hold any character.
 * Per user, never the working directory: a relative default would scatter
 * caches over every directory sluice is run in.
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

/**
 * The location `value` names: an S3 URL (validated; `localDir` overrides
 * the default local directory) or a directory path resolved against the
 * working directory. An empty value is the default `./.sluice`.
 */
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

/**
 * The store the CLI and the SDK open: an explicit value, else
 * `$SLUICE_STORE`, else `./.sluice`. An empty value counts as unset (it would
 * otherwise resolve to the working directory itself).
 */
export function resolveStoreLocation(explicit?: string, env: NodeJS.ProcessEnv = process.env): StoreLocation {
  return parseStoreLocation(explicit || env.SLUICE_STORE || DEFAULT_STORE_DIR, env);
}

/** How a location is written back: the directory, or the S3 URL (what `--store` would take). */
export function describeLocation(location: StoreLocation): string {
  return location.kind === 'directory' ? location.dir : location.url;
}
