/**
 * The artifact store's public API: `sluice/store`.
 */
export type { BlobHandle, BlobIdentity } from './blob-handle.js';
export { openBlob } from './blob-handle.js';
export type { BlobInfo } from './blob-writer.js';
export { BlobWriter } from './blob-writer.js';
export { StoreFile } from './file.js';
export type { BlobCheck, VerifiedBlob } from './integrity.js';
export { checkBlob, openVerifiedBlob } from './integrity.js';
export type { StoreIO } from './io.js';
export { realIO } from './io.js';
export { StoreLayout } from './layout.js';
export { INDEX_EVERY_BYTES, INDEX_EVERY_LINES, INDEX_MIN_BLOB_BYTES } from './line-index.js';
export { countNewlines, lineCount, linesOfString } from './lines.js';
export type { DirectoryLocation, S3Location, StoreLocation } from './location.js';
export { parseStoreLocation, resolveStoreLocation } from './location.js';
export type { Manifest, ManifestStream } from './manifest.js';
export { decodeManifest, encodeManifest, MANIFEST_KIND, MAX_MANIFEST_BYTES, manifestSchema } from './manifest.js';
export { loadManifest, tryLoadManifest } from './manifest-load.js';
export type { PageInfo, ReadPage, ReadPageBytes, ReadPageOptions } from './pages.js';
export { MAX_PAGE_BYTES, MAX_PAGE_LINES, pageOptions, readPage, readPageBytes } from './pages.js';
export type { Pin, StoreOptions } from './store.js';
export { DEFAULT_STORE_DIR, resolveStoreDir, Store } from './store.js';
export type { ArtifactUri } from './uri.js';
export { ARTIFACT_SCHEME, formatArtifactUri, isArtifactUri, isDigest, parseArtifactUri } from './uri.js';
export type { VerifyReport } from './verify.js';
export { verifyStore } from './verify.js';
