/**
 * The AWS SDK v3's S3 client, loaded the first time an S3 store opens. It
 * is an optional peer dependency (engine/protocol/optional-dependencies.ts):
 * a consumer who never names an `s3://` store installs nothing of it, and
 * one who does without it gets EMISSINGDEP with the install command. The
 * table and its loader live in the protocol because store/ (and the workers
 * that open the store for the read tool) may import nothing else of engine/.
 * `@aws-sdk/lib-storage` is not needed: multipart uploads stream file
 * ranges as parts (store/s3/objects.ts).
 */
import type * as ClientS3 from '@aws-sdk/client-s3';
import { importOptional, OPTIONAL_DEPENDENCIES } from '../../engine/protocol/optional-dependencies.js';

/** The SDK module an S3 store uses. */
export interface S3Sdk {
  /** `@aws-sdk/client-s3`. */
  readonly client: typeof ClientS3;
}

let loading: Promise<S3Sdk> | undefined;

/** Loads the SDK once per thread; a failure (EMISSINGDEP) is not remembered, so installing it and retrying works. */
export function loadS3Sdk(): Promise<S3Sdk> {
  loading ??= importOptional<typeof ClientS3>(OPTIONAL_DEPENDENCIES.s3).then(
    (client) => ({ client }),
    (err: unknown) => {
      loading = undefined;
      throw err;
    },
  );
  return loading;
}
