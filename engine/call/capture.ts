/**
 * The capture coordinator for one call: every accepted chunk is appended to
 * its stream's temporary capture file in the store, hashed and line-scanned
 * while streaming (store/blob-writer.ts), and fed to a bounded preview. At the
 * end the streams are published as blobs (plus a manifest for named
 * streams). Memory per call is the credit window plus the previews, whatever
 * the output size.
 */

import type { BlobInfo, BlobWriter } from '../../store/blob-writer.js';
import { crashPoint } from '../../store/crash-point.js';
import { encodeManifest } from '../../store/manifest.js';
import type { Pin, Store } from '../../store/store.js';
import type { OutputView } from '../presentation/model-view.js';
import { type Preview, PreviewBuilder } from '../presentation/preview.js';
import { ProtocolError, SizeLimitError } from '../protocol/errors.js';
import type { OutputDeclaration } from '../protocol/streams.js';
import type { OutputRef } from '../result.js';

/** Limits a capture applies. */
export interface CaptureLimits {
  /** Preview lines per stream. */
  maxLines: number;
  /** Preview bytes per stream. */
  maxBytes: number;
  /** Hard bound on each stream's size; a chunk that would pass it fails the call. */
  maxStreamBytes: number;
}

/** What a finished capture published. */
export interface CapturedOutput {
  ref: OutputRef;
  view: OutputView;
}

interface CapturedStream {
  name: string;
  writer: BlobWriter;
  preview: PreviewBuilder;
}

/** Captures the streams of one call into the store. */
export class Capture {
  private readonly streams: CapturedStream[];
  private readonly decl: OutputDeclaration;
  private readonly limits: CaptureLimits;
  private readonly store: Store;
  private settled = false;

  constructor(store: Store, decl: OutputDeclaration, limits: CaptureLimits) {
    this.store = store;
    this.decl = decl;
    this.limits = limits;
    const names = decl.kind === 'single' ? [''] : decl.streams;
    this.streams = names.map((name) => ({
      name,
      writer: store.writer(),
      preview: new PreviewBuilder(limits.maxLines, limits.maxBytes),
    }));
  }

  /** Whether accepted chunks are kept after they are written: no, they are on disk (the preview copies). */
  readonly keepsChunks = false;

  /** Number of streams. */
  get size(): number {
    return this.streams.length;
  }

  /** Bytes and lines accepted per stream so far. */
  stats(): Array<{ name: string; bytes: number; lines: number }> {
    return this.streams.map((c) => ({ name: c.name || 'output', bytes: c.writer.bytes, lines: c.writer.lines }));
  }

  /**
   * Accepts a chunk for stream `index`. Throws {@link SizeLimitError} (and
   * accepts nothing of the chunk) when it would pass the size bound. The
   * promise settles when the bytes are on disk: that is when credit may go back.
   */
  accept(index: number, bytes: Uint8Array): Promise<void> {
    const ch = this.streams[index];
    if (!ch) throw new ProtocolError(`chunk for stream ${index}, but only ${this.streams.length} declared`);
    if (ch.writer.bytes + bytes.length > this.limits.maxStreamBytes) {
      throw new SizeLimitError(
        `${ch.name ? `stream ${ch.name}` : 'output'} passed the size bound of ${this.limits.maxStreamBytes} bytes`,
        { stream: ch.name, bound: this.limits.maxStreamBytes },
      );
    }
    ch.preview.push(bytes);
    return ch.writer.write(bytes);
  }

  /** The first write error of any stream. */
  get writeError(): unknown {
    for (const c of this.streams) if (c.writer.error !== undefined) return c.writer.error;
    return undefined;
  }

  /**
   * Publishes every stream (waiting for pending writes first), adding each
   * digest to `pin` before its blob becomes visible. On any failure nothing is
   * returned and the remaining temporary files are removed.
   */
  async publish(pin: Pin): Promise<CapturedOutput> {
    this.settled = true;
    const infos: BlobInfo[] = [];
    try {
      for (const c of this.streams) infos.push(await c.writer.commit(undefined, pin));
    } catch (err) {
      await this.discard();
      throw err;
    }
    const previews: Preview[] = this.streams.map((c, i) => c.preview.finish((infos[i] as BlobInfo).bytes));
    if (this.decl.kind === 'single') {
      const info = infos[0] as BlobInfo;
      const preview = previews[0] as Preview;
      return {
        ref: {
          kind: 'single',
          digest: info.digest,
          bytes: info.bytes,
          lines: info.lines,
          truncated: preview.truncated,
        },
        view: { kind: 'single', digest: info.digest, preview },
      };
    }
    const entries = this.streams.map((c, i) => {
      const info = infos[i] as BlobInfo;
      return { name: c.name, digest: info.digest, bytes: info.bytes, lines: info.lines };
    });
    const manifest = await this.store.publishBytes(encodeManifest(entries), undefined, pin);
    crashPoint('manifest-renamed');
    return {
      ref: {
        kind: 'streams',
        manifest: manifest.digest,
        streams: entries.map((e, i) => ({ ...e, truncated: (previews[i] as Preview).truncated })),
      },
      view: {
        kind: 'streams',
        manifest: manifest.digest,
        streams: entries.map((e, i) => ({ name: e.name, preview: previews[i] as Preview })),
      },
    };
  }

  /** Drops everything; temporary files are removed. */
  async discard(): Promise<void> {
    this.settled = true;
    await Promise.all(this.streams.map((c) => c.writer.abort()));
  }

  /** True once published or discarded. */
  get done(): boolean {
    return this.settled;
  }
}
