/**
 * `--store`, `$SLUICE_STORE` and the SDK's `store` option name a directory
 * or an S3 bucket and prefix: an `s3://` value is parsed into its parts or
 * refused with EBADOPTION, and never becomes a directory named `s3:`.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../engine/protocol/errors.js';
import { parseStoreLocation, resolveStoreLocation } from '../../store/location.js';
import { resolveStoreDir, Store } from '../../store/store.js';
import { filesUnder, tempDir } from './helpers.js';

/** The local directory an `s3://bkt/<prefix>` store gets by default under `env`. */
function defaultLocalDir(bucket: string, prefix: string, env: NodeJS.ProcessEnv): string {
  const location = parseStoreLocation(`s3://${bucket}/${prefix}`, env);
  if (location.kind !== 's3') throw new Error(`not an S3 location: ${location.dir}`);
  return location.localDir;
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SluiceError);
    return (err as SluiceError).code;
  }
  return undefined;
}

const ENV = { XDG_CACHE_HOME: '/var/cache/u' } as NodeJS.ProcessEnv;

describe('store locations', () => {
  it('parses s3://bucket/prefix into bucket, prefix and canonical URL', () => {
    expect(parseStoreLocation('s3://my-bucket/team/a', ENV)).toMatchObject({
      kind: 's3',
      bucket: 'my-bucket',
      prefix: 'team/a',
      url: 's3://my-bucket/team/a',
    });
    // A trailing slash names the same store; no prefix is the bucket's root.
    expect(parseStoreLocation('s3://my-bucket/team/a/', ENV)).toMatchObject({
      prefix: 'team/a',
      url: 's3://my-bucket/team/a',
    });
    expect(parseStoreLocation('s3://b.c-d', ENV)).toMatchObject({ bucket: 'b.c-d', prefix: '', url: 's3://b.c-d' });
  });

  it('refuses malformed S3 URLs with EBADOPTION quoting the value', () => {
    const bad = [
      'S3://bucket/p',
      's3:/bucket/p',
      's3:bucket',
      's3://',
      's3:///p',
      's3://Bucket/p',
      's3://b_b/p',
      's3://ab/p',
      's3://-bucket/p',
      's3://a..b/p',
      's3://bucket//p',
      's3://bucket/a//b',
      's3://bucket/./p',
      's3://bucket/a/../b',
      's3://bucket/p?x=1',
      's3://bucket/p#f',
      's3://bucket/a\\b',
      's3://bucket/a\nb',
      `s3://bucket/${'x'.repeat(513)}`,
    ];
    for (const value of bad) {
      let caught: unknown;
      try {
        parseStoreLocation(value, ENV);
      } catch (err) {
        caught = err;
      }
      expect(caught, value).toBeInstanceOf(SluiceError);
      expect((caught as SluiceError).code, value).toBe('EBADOPTION');
      expect((caught as SluiceError).details, value).toEqual({ store: value });
    }
  });

  it('takes anything else for a directory, resolved against the working directory', () => {
    expect(parseStoreLocation('rel/dir', ENV)).toEqual({ kind: 'directory', dir: join(process.cwd(), 'rel/dir') });
    expect(parseStoreLocation('', ENV)).toEqual({ kind: 'directory', dir: join(process.cwd(), '.sluice') });
    // A bucket-like path without the scheme is a directory, as it always was.
    expect(parseStoreLocation('bucket/prefix', ENV).kind).toBe('directory');
  });

  it('chooses --store over $SLUICE_STORE over ./.sluice, an empty value counting as unset', () => {
    const env = { ...ENV, SLUICE_STORE: 's3://env-bucket/p' };
    expect(resolveStoreLocation('s3://flag-bucket', env)).toMatchObject({ bucket: 'flag-bucket' });
    expect(resolveStoreLocation('', env)).toMatchObject({ bucket: 'env-bucket', prefix: 'p' });
    expect(resolveStoreLocation(undefined, ENV)).toEqual({ kind: 'directory', dir: join(process.cwd(), '.sluice') });
  });

  it('puts the local directory in the user cache, keyed by endpoint, bucket and prefix', () => {
    const a = defaultLocalDir('bkt', 'p', ENV);
    expect(a).toMatch(/^\/var\/cache\/u\/sluice\/s3\/bkt-[0-9a-f]{16}$/);
    expect(defaultLocalDir('bkt', 'q', ENV)).not.toBe(a);
    expect(defaultLocalDir('bkt', 'p', { ...ENV, AWS_ENDPOINT_URL_S3: 'http://other:9000' })).not.toBe(a);
    expect(defaultLocalDir('bkt', 'p', { ...ENV })).toBe(a);
    // Without XDG_CACHE_HOME: ~/.cache; $SLUICE_STORE_LOCAL overrides everything.
    expect(defaultLocalDir('bkt', 'p', {})).toMatch(/\/\.cache\/sluice\/s3\/bkt-[0-9a-f]{16}$/);
    expect(defaultLocalDir('bkt', 'p', { ...ENV, SLUICE_STORE_LOCAL: '/srv/sluice-local' })).toBe('/srv/sluice-local');
    expect(parseStoreLocation('s3://bkt/p', ENV, 'here')).toMatchObject({ localDir: join(process.cwd(), 'here') });
  });

  it('resolveStoreDir refuses an S3 location (EUNSUPPORTED) and a malformed one (EBADOPTION)', () => {
    expect(codeOf(() => resolveStoreDir('s3://bucket/p', ENV))).toBe('EUNSUPPORTED');
    expect(codeOf(() => resolveStoreDir(undefined, { SLUICE_STORE: 's3://Bad/p' }))).toBe('EBADOPTION');
    expect(resolveStoreDir('x', ENV)).toBe(join(process.cwd(), 'x'));
  });

  it('opening a malformed S3 location creates nothing, in the working directory or anywhere', async () => {
    const cwd = await tempDir();
    const before = process.cwd();
    process.chdir(cwd);
    try {
      for (const value of ['s3:/b/p', 'S3://b/p', 's3://B/p']) {
        await expect(Store.open(value)).rejects.toMatchObject({ code: 'EBADOPTION' });
      }
    } finally {
      process.chdir(before);
    }
    expect(await filesUnder(cwd)).toEqual([]);
    expect(await fsp.readdir(cwd)).toEqual([]);
  });
});
