/**
 * The NATS client, loaded the first time a farm queue opens. Both packages
 * are optional peer dependencies (engine/protocol/optional-dependencies.ts),
 * as the S3 SDK is (store/s3/sdk.ts): a consumer who never names a queue
 * installs nothing of them, and one who does without them gets EMISSINGDEP
 * with the install command.
 */
import type * as JetStream from '@nats-io/jetstream';
import type * as Transport from '@nats-io/transport-node';
import { importOptional, OPTIONAL_DEPENDENCIES } from '../protocol/optional-dependencies.js';

/** The client modules a farm queue uses. */
export interface NatsClient {
  /** `@nats-io/transport-node`: the connection. */
  readonly transport: typeof Transport;
  /** `@nats-io/jetstream`: streams, consumers, acks. */
  readonly jetstream: typeof JetStream;
}

let loading: Promise<NatsClient> | undefined;

/** Loads the client once per thread; a failure (EMISSINGDEP) is not remembered, so installing it and retrying works. */
export function loadNats(): Promise<NatsClient> {
  loading ??= Promise.all([
    importOptional<typeof Transport>(OPTIONAL_DEPENDENCIES.queue),
    importOptional<typeof JetStream>(OPTIONAL_DEPENDENCIES.queueJetstream),
  ]).then(
    ([transport, jetstream]) => ({ transport, jetstream }),
    (err: unknown) => {
      loading = undefined;
      throw err;
    },
  );
  return loading;
}
