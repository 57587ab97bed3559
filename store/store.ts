/**
 * The directory store: content-addressed blobs, their line indexes, pins that
 * protect published objects until their references are durable, and the tmp/
 * area where every write starts.
 */
import { randomBytes } from 'node:crypto';
import { constants, promises as fsp, type Stats, stat } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ClosedError, toSluiceError } from '../engine/protocol/errors.js';
import { type BlobInfo, BlobWriter } from './blob-writer.js';
import { DirSync } from './dir-sync.js';
import type { StoreFile } from './file.js';
import { refreshIntact } from './integrity.js';
import { makeDirs, realIO, type StoreIO } from './io.js';
import { StoreLayout } from './layout.js';
import type { Manifest } from './manifest.js';
import { loadManifest } from './manifest-load.js';
import { type Pin, PinJournal } from './pins.js';
import { type ReadPage, type ReadPageBytes, type ReadPageOptions, readPage, readPageBytes } from './read.js';
import { type VerifyOptions, type VerifyReport, verifyStore } from './verify.js';

/** The default store directory, relative to the working directory. */
export const DEFAULT_STORE_DIR = '.sluice';

export type { Pin } from './pins.js';

/** Options of {@link Store.open}. */
export interface StoreOptions {
  /** Filesystem calls to use; tests inject faults here. @default realIO */
  io?: StoreIO;
}

/** Background flushes of long captures a store runs at once (libuv has 4 threads in an ES module host). */
export const MAX_BACKGROUND_WRITEBACKS = 2;

const CREATE_FLAGS = constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY;

/**
 * Resolves the store directory the way the CLI does: an explicit value, else
 * `$SLUICE_STORE`, else `./.sluice`. An empty value counts as unset (it would
 * otherwise resolve to the working directory itself).
 */
export function resolveStoreDir(explicit?: string, env: NodeJS.ProcessEnv = process.env): string {
  return resolve(explicit || env.SLUICE_STORE || DEFAULT_STORE_DIR);
}

/** A content-addressed artifact store rooted at one directory. */
export class Store {
  /** Paths inside the store. */
  readonly layout: StoreLayout;
  /** Filesystem calls (replaceable for fault injection). */
  readonly io: StoreIO;
  private readonly knownDirs = new Set<string>();
  /**
   * Temporary names are `<pid>-<12 hex of this store><counter>.<kind>`: unique
   * without a random draw per file (the owner pattern GC reads is unchanged).
   */
  private readonly tmpPrefix = `${process.pid}-${randomBytes(6).toString('hex')}`;
  private tmpCounter = 0;
  private writebacks = 0;
  private readonly pins: PinJournal;
  private readonly dirSync: DirSync;
  private closed = false;

  private constructor(root: string, io: StoreIO) {
    this.layout = new StoreLayout(root);
    this.io = io;
    this.pins = new PinJournal(this.layout.pins, io);
    this.dirSync = new DirSync(io);
  }

  /** Opens (creating when needed) the store at `dir`. Opening never reads blobs, so corrupt content cannot prevent it. */
  static async open(dir: string, options: StoreOptions = {}): Promise<Store> {
    const store = new Store(resolve(dir), options.io ?? realIO);
    const l = store.layout;
    for (const d of [l.blobs, l.index, l.tmp, l.pins, l.sessions]) {
      try {
        await makeDirs(d);
      } catch (err) {
        // Not a directory, not writable, disk full: a typed EDISK naming the OS code, like every store write.
        throw toSluiceError(err, 'EDISK');
      }
      store.knownDirs.add(d);
    }
    return store;
  }

  /** The store's root directory. */
  get root(): string {
    return this.layout.root;
  }

  /**
   * Marks the store closed (later writes fail with ECLOSED), closes its
   * directory descriptors, and closes its pin journal, removing the file when
   * nothing is held.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.dirSync.close();
    await this.pins.close();
  }

  /**
   * Reserves one of the store's {@link MAX_BACKGROUND_WRITEBACKS} slots for a
   * capture's background flush; false when they are all taken (the capture
   * tries again after its next write). Without a bound, 16 long captures could
   * hold all of libuv's 4 threads in fdatasync while every write waited.
   * @internal
   */
  beginWriteback(): boolean {
    if (this.writebacks >= MAX_BACKGROUND_WRITEBACKS) return false;
    this.writebacks++;
    return true;
  }

  /** Frees a slot taken with {@link beginWriteback}. @internal */
  endWriteback(): void {
    this.writebacks--;
  }

  /** Starts a streaming blob write. */
  writer(): BlobWriter {
    this.assertOpen();
    return new BlobWriter(this);
  }

  /** Publishes `content` (a string is stored as UTF-8) and returns the blob; `pin` protects it before it is placed. */
  async publishBytes(content: Uint8Array | string, expectedDigest?: string, pin?: Pin): Promise<BlobInfo> {
    const w = this.writer();
    const buf = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    try {
      if (buf.length > 0) await w.write(buf);
    } catch (err) {
      await w.abort();
      throw err;
    }
    return w.commit(expectedDigest, pin);
  }

  /**
   * Reads one page of `artifact://<digest>` or `artifact://<digest>/<stream>`
   * (zero-based line `offset`, `limit` lines, at most 2000 lines and 2 MiB).
   * See {@link readPage} for the contract and its errors.
   */
  readPage(uri: string, options?: ReadPageOptions): Promise<ReadPage> {
    return readPage(this, uri, options);
  }

  /** Like {@link readPage}, with the page's stored bytes instead of their text (see {@link readPageBytes}). */
  readPageBytes(uri: string, options?: ReadPageOptions): Promise<ReadPageBytes> {
    return readPageBytes(this, uri, options);
  }

  /**
   * The manifest stored as blob `digest` (integrity-checked, at most
   * MAX_MANIFEST_BYTES read). Fails with ENOTFOUND, EINTEGRITY or ENOTMANIFEST.
   */
  loadManifest(digest: string): Promise<Manifest> {
    return loadManifest(this, digest);
  }

  /**
   * Hashes every blob and lists corrupt ones and manifest references that
   * are missing. Removes nothing; with `repair`, moves corrupt blobs to
   * quarantine/ so the next publish of their content restores them.
   */
  verify(options: VerifyOptions = {}): Promise<VerifyReport> {
    return verifyStore(this, options);
  }

  /** True when a blob with `digest` is present (content is not checked). */
  async hasBlob(digest: string): Promise<boolean> {
    try {
      await fsp.access(this.layout.blobPath(digest));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Pins `digests` against garbage collection. The pin is a file in pins/
   * owned by this process (its pid is in the name), one digest per line, so
   * a pin left by a dead process is recognisable and reclaimable. Publishers
   * add a digest *before* placing the blob, so a GC that sees the blob also
   * sees the pin (see docs/operations.md).
   */
  pin(digests: readonly string[] = []): Promise<Pin> {
    this.assertOpen();
    return this.pins.pin(digests);
  }

  /**
   * Creates a new temporary file in tmp/, named after this process so cleanup
   * can tell live owners from dead ones.
   * @internal
   */
  async createTemp(kind: string): Promise<{ handle: StoreFile; path: string }> {
    this.assertOpen();
    const path = `${this.layout.tmp}/${this.tmpPrefix}${(this.tmpCounter++).toString(36)}.${kind}`;
    try {
      return { handle: await this.io.open(path, CREATE_FLAGS, 0o600), path };
    } catch (err) {
      throw toSluiceError(err, 'EDISK');
    }
  }

  /**
   * Moves a fully written and fsynced temporary file to its content address
   * (rename, then fsync of the directory). The caller has checked with
   * {@link refreshBlob} that no good copy is there; a same-named blob of the
   * wrong size is corrupt and is replaced.
   * @internal
   */
  async placeBlob(tmpPath: string, digest: string): Promise<void> {
    const dir = dirname(this.layout.blobPath(digest));
    await this.ensureDir(dir);
    await this.io.rename(tmpPath, this.layout.blobPath(digest));
    await this.dirSync.sync(dir);
  }

  /**
   * True when blob `digest` is present, `bytes` long and intact (its content
   * hashed, unless this store verified this very file already); its mtime
   * is then refreshed, so a concurrent GC sees it as fresh. A same-named
   * file of another size, or corrupt, does not count: the caller places its
   * own copy over it, so publishing the same content again heals it.
   * @internal
   */
  async refreshBlob(digest: string, bytes: number): Promise<boolean> {
    this.assertOpen();
    const target = this.layout.blobPath(digest);
    const existing = await statOrUndefined(target);
    if (!existing?.isFile() || existing.size !== bytes) return false;
    const now = new Date();
    return refreshIntact(this, digest, bytes, () =>
      this.io.utimes(target, now, now).then(
        () => true,
        (err: { code?: unknown }) => {
          // Removed (by GC) since the stat: the caller publishes its own copy instead of failing.
          if (err?.code === 'ENOENT') return false;
          throw err;
        },
      ),
    );
  }

  /**
   * Moves a finished line-index file beside its blob. No fsync: the index is a
   * cache that is validated on use and rebuilt when missing.
   * @internal
   */
  async placeIndex(tmpPath: string, digest: string): Promise<void> {
    const target = this.layout.indexPath(digest);
    await this.ensureDir(dirname(target));
    await this.io.rename(tmpPath, target);
  }

  private async ensureDir(dir: string): Promise<void> {
    if (this.knownDirs.has(dir)) return;
    await this.io.mkdir(dir);
    this.knownDirs.add(dir);
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError('the store is closed');
  }
}

/** stat(2) through the callback API (cheaper for the main thread than fs/promises), undefined on any error. */
function statOrUndefined(path: string): Promise<Stats | undefined> {
  return new Promise((resolve) => stat(path, (err, st) => resolve(err ? undefined : st)));
}
