/**
 * Loading a stored manifest by digest. A manifest is an ordinary blob, so it
 * is integrity-checked like any other; only blobs no larger than
 * MAX_MANIFEST_BYTES are ever read into memory to be decoded.
 */
import { NotManifestError } from '../engine/protocol/errors.js';
import { openVerifiedAt, openVerifiedBlob, type VerifiedBlob } from './integrity.js';
import type { Manifest } from './manifest.js';
import type { Store } from './store.js';

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The manifest schema pulls in zod, whose import alone costs a CLI start-up
 * hundreds of milliseconds; only stream selection and audits need it, so it is
 * loaded on first use rather than with the store.
 */
function manifestModule(): Promise<typeof import('./manifest.js')> {
  return import('./manifest.js');
}

/**
 * The manifest stored as blob `digest`, or undefined when that blob is not a
 * manifest (too large, not UTF-8, not valid manifest JSON).
 *
 * @throws NotFoundError (ENOTFOUND) when the blob is absent.
 * @throws IntegrityError (EINTEGRITY) when its content does not match its digest.
 */
export async function tryLoadManifest(store: Store, digest: string): Promise<Manifest | undefined> {
  return decodeVerified(await openVerifiedBlob(store, digest));
}

/**
 * {@link tryLoadManifest} of the copy of blob `digest` at `path` (a
 * collection reads its own tombstones so). Not part of the public store API.
 *
 * @throws NotFoundError (ENOTFOUND) when no file is at `path`.
 * @throws IntegrityError (EINTEGRITY) when its content does not match `digest`.
 */
export async function tryLoadManifestAt(store: Store, digest: string, path: string): Promise<Manifest | undefined> {
  return decodeVerified(await openVerifiedAt(store, digest, path));
}

/** The manifest in a verified blob, or undefined when it is not one; closes the blob. */
export async function decodeVerified(blob: VerifiedBlob): Promise<Manifest | undefined> {
  try {
    const { decodeManifest, MAX_MANIFEST_BYTES } = await manifestModule();
    if (blob.bytes > MAX_MANIFEST_BYTES) return undefined;
    const buf = Buffer.alloc(blob.bytes);
    let off = 0;
    while (off < buf.length) {
      const { bytesRead } = await blob.handle.read(buf, off, buf.length - off, off);
      if (bytesRead === 0) return undefined;
      off += bytesRead;
    }
    let text: string;
    try {
      text = strictUtf8.decode(buf);
    } catch {
      return undefined;
    }
    return decodeManifest(text);
  } finally {
    await blob.close();
  }
}

/**
 * The manifest stored as blob `digest`.
 *
 * @throws NotFoundError (ENOTFOUND) when the blob is absent.
 * @throws IntegrityError (EINTEGRITY) when its content does not match its digest.
 * @throws NotManifestError (ENOTMANIFEST) when the blob is not a manifest.
 */
export async function loadManifest(store: Store, digest: string): Promise<Manifest> {
  const manifest = await tryLoadManifest(store, digest);
  if (!manifest) {
    throw new NotManifestError(
      `artifact ${digest} is not a stream manifest, so it has no streams to select; read artifact://${digest} instead`,
      { digest },
    );
  }
  return manifest;
}
