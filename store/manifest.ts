/**
 * The generic stream manifest: which blob holds each named stream, in
 * declaration order. Stored as an ordinary blob in canonical JSON (fixed key
 * order, no whitespace, trailing newline), so the same streams always give the
 * same bytes and so the same digest.
 */

import { isStreamName } from '../engine/protocol/streams.js';
import { z } from '../engine/protocol/zod.js';

/** Marks a blob as a sluice manifest. */
export const MANIFEST_KIND = 'sluice.manifest/1';

/** A manifest can never be larger than this (16 streams of bounded names). */
export const MAX_MANIFEST_BYTES = 16 * 1024;

/** One stream entry of a manifest. */
export interface ManifestStream {
  name: string;
  digest: string;
  bytes: number;
  lines: number;
}

/** A decoded manifest. */
export interface Manifest {
  kind: typeof MANIFEST_KIND;
  streams: ManifestStream[];
}

const count = z.number().int().nonnegative();

/** The zod schema of a manifest; decoding validates with it. Strict: a blob with extra fields is not a manifest. */
export const manifestSchema = z.strictObject({
  kind: z.literal(MANIFEST_KIND),
  streams: z
    .array(
      z.strictObject({
        name: z.string().refine(isStreamName, 'invalid stream name'),
        digest: z.string().regex(/^[0-9a-f]{64}$/),
        bytes: count,
        lines: count,
      }),
    )
    .max(16)
    .refine((s) => new Set(s.map((x) => x.name)).size === s.length, 'duplicate stream name'),
});

/** Canonical bytes of a manifest for `streams` (in the given, declaration, order). */
export function encodeManifest(streams: readonly ManifestStream[]): string {
  const body = streams.map((s) => ({ name: s.name, digest: s.digest, bytes: s.bytes, lines: s.lines }));
  return `${JSON.stringify({ kind: MANIFEST_KIND, streams: body })}\n`;
}

/** Decodes manifest text, or returns undefined when it is not a valid manifest in its canonical encoding. */
export function decodeManifest(text: string): Manifest | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = manifestSchema.safeParse(raw);
  if (!parsed.success) return undefined;
  // Only the canonical bytes are a manifest: every reader (read, verify, GC, which looks at the
  // first bytes only) then agrees on which blobs are manifests and what they reference.
  if (encodeManifest(parsed.data.streams) !== text) return undefined;
  return parsed.data as Manifest;
}
