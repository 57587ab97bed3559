/**
 * The public artifact URI grammar, exactly:
 *
 *     artifact://<64 lowercase hex>
 *     artifact://<64 lowercase hex>/<stream>
 *
 * Nothing else parses: no query, fragment, extra segment, uppercase,
 * percent-escape or traversal. The stream segment goes through the same
 * validator as output declarations.
 */
import { BadUriError } from '../engine/protocol/errors.js';
import { streamNameProblem } from '../engine/protocol/streams.js';

/** The scheme prefix that routes a read to the store. */
export const ARTIFACT_SCHEME = 'artifact://';

const DIGEST = /^[0-9a-f]{64}$/;

/** A parsed artifact URI. */
export interface ArtifactUri {
  /** SHA-256 of the addressed blob, 64 lowercase hex. */
  digest: string;
  /** The selected stream of a manifest, when the URI has a stream segment. */
  stream?: string;
}

const SCHEME = /^artifact:/i;

/**
 * True when `s` has the artifact scheme, in any letter case and with or
 * without the `//`, and so must parse as an artifact URI (or fail with
 * EBADURI), never fall back to a filesystem path. `ARTIFACT://...` and
 * `artifact:abc` are malformed artifact URIs, not file names.
 */
export function isArtifactUri(s: string): boolean {
  return SCHEME.test(s);
}

/** True when `s` is 64 lowercase hex characters. */
export function isDigest(s: unknown): s is string {
  return typeof s === 'string' && DIGEST.test(s);
}

/** Parses an artifact URI or throws {@link BadUriError} saying what is wrong. */
export function parseArtifactUri(uri: string): ArtifactUri {
  if (typeof uri !== 'string') throw new BadUriError('artifact URI must be a string');
  const quoted = JSON.stringify(uri.length > 200 ? `${uri.slice(0, 200)}...` : uri);
  if (!uri.startsWith(ARTIFACT_SCHEME)) throw new BadUriError(`${quoted} does not start with ${ARTIFACT_SCHEME}`);
  const rest = uri.slice(ARTIFACT_SCHEME.length);
  const slash = rest.indexOf('/');
  const digest = slash === -1 ? rest : rest.slice(0, slash);
  if (!DIGEST.test(digest)) {
    throw new BadUriError(`${quoted}: the digest must be exactly 64 lowercase hex characters`);
  }
  if (slash === -1) return { digest };
  const stream = rest.slice(slash + 1);
  const problem = streamNameProblem(stream);
  if (problem) throw new BadUriError(`${quoted}: ${problem}`);
  return { digest, stream };
}

/** Formats the public URI for a digest and optional stream. */
export function formatArtifactUri(digest: string, stream?: string): string {
  return stream === undefined ? `${ARTIFACT_SCHEME}${digest}` : `${ARTIFACT_SCHEME}${digest}/${stream}`;
}
