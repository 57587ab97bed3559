/**
 * Optional peer dependencies, each resolved when its feature is first used
 * and failing that feature alone with the install command when missing. To
 * add one: package.json's peer, meta and dev entries, a row here, and
 * {@link requireOptional} where the feature starts.
 */
import { MissingDependencyError } from './errors.js';

/** A package a feature loads only when used. */
export interface OptionalDependency {
  /** The package name, as in package.json. */
  readonly name: string;
  /** The version range sluice supports (its `peerDependencies` entry). */
  readonly range: string;
  /** A specifier inside the package that the feature imports, resolved to tell whether it is installed. */
  readonly entry: string;
  /** What needs it, for the error message. */
  readonly feature: string;
}

/** Every optional dependency, by the feature that needs it. */
export const OPTIONAL_DEPENDENCIES = {
  /** The MCP client (stdio transport) of `Engine.addMcpServer`, `--mcp` and `mcpServers` in `--config`; the MCP server of `sluice mcp` and `/mcp`. */
  mcp: {
    name: '@modelcontextprotocol/sdk',
    range: '^1.32.2',
    entry: '@modelcontextprotocol/sdk/client/index.js',
    feature:
      'MCP servers and clients (Engine.addMcpServer, --mcp, "mcpServers" in --config, sluice mcp, /mcp of sluice serve)',
  },
  /** The Prometheus text renderer of `GET /v1/metrics` (server/metrics.ts), loaded on the first scrape. */
  metrics: {
    name: 'prom-client',
    range: '^15.1.3',
    entry: 'prom-client',
    feature: 'Prometheus metrics (GET /v1/metrics of sluice serve)',
  },
  /** The NATS connection of a farm queue (`nats://host:port/NAME`, engine/farm/nats.ts), loaded when a queue opens. */
  queue: {
    name: '@nats-io/transport-node',
    range: '^3.4.0',
    entry: '@nats-io/transport-node',
    feature: 'Farm queues (nats://host:port/NAME, $SLUICE_QUEUE)',
  },
  /** The JetStream API over that connection (streams, the durable consumer, acks), loaded with it. */
  queueJetstream: {
    name: '@nats-io/jetstream',
    range: '^3.4.0',
    entry: '@nats-io/jetstream',
    feature: 'Farm queues (nats://host:port/NAME, $SLUICE_QUEUE)',
  },
  /** The S3 client of an S3 store (`--store s3://bucket/prefix`), loaded when such a store opens (store/s3/sdk.ts). */
  s3: {
    name: '@aws-sdk/client-s3',
    range: '^3.1175.0',
    entry: '@aws-sdk/client-s3',
    feature: 'S3 stores (--store s3://bucket/prefix, $SLUICE_STORE, the store option)',
  },
} as const satisfies Record<string, OptionalDependency>;

/** The command that installs `dep` beside sluice. */
export function installCommand(dep: OptionalDependency): string {
  return `npm install ${dep.name}@'${dep.range}'`;
}

function missing(dep: OptionalDependency, cause: unknown): MissingDependencyError {
  // An installed copy that lacks the entry is another major version: say so rather than "not installed".
  const wrong = (cause as { code?: unknown }).code === 'ERR_PACKAGE_PATH_NOT_EXPORTED';
  const state = wrong ? `installed in a version without ${dep.entry}` : 'not installed';
  const err = new MissingDependencyError(
    `${dep.feature} need the optional dependency ${dep.name} (${dep.range}), which is ${state}: ${installCommand(dep)}`,
    { dependency: dep.name, range: dep.range, install: installCommand(dep) },
  );
  // Kept for SLUICE_DEBUG stacks: why resolution failed (not found, not exported, ...).
  Object.defineProperty(err, 'cause', { value: cause, enumerable: false });
  return err;
}

function isNotFound(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND' || code === 'ERR_PACKAGE_PATH_NOT_EXPORTED';
}

/**
 * Resolves `dep.entry` from this package's location (so a worker finds the
 * same copy) and returns its URL, or throws {@link MissingDependencyError}.
 * Cheap: call it before starting a thread that imports it, so the caller
 * gets the typed error instead of a thread that fails to load.
 */
export function requireOptional(
  dep: OptionalDependency,
  resolve: (specifier: string) => string = import.meta.resolve,
): string {
  try {
    return resolve(dep.entry);
  } catch (err) {
    if (isNotFound(err)) throw missing(dep, err);
    throw err;
  }
}

/** Imports `dep.entry` on the calling thread, or throws {@link MissingDependencyError} when it is not installed. */
export async function importOptional<T = unknown>(dep: OptionalDependency): Promise<T> {
  return (await import(requireOptional(dep))) as T;
}
