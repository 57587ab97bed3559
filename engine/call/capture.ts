/** The capture of one call: chunks appended to temporary blobs as they stream, and bounded previews, so memory does not grow with the output. */

import type { BlobInfo, BlobWriter } from '../../store/blob-writer.js';
import { crashPoint } from '../../store/crash-point.js';
import { encodeManifest } from '../../store/manifest.js';
import type { Pin, Store } from '../../store/store.js';
import { type PreviewMode, type StreamPreview, StreamPreviewBuilder } from '../presentation/head-tail.js';
import type { OutputView } from '../presentation/model-view.js';
import { ProtocolError, SizeLimitError } from '../protocol/errors.js';
import type { OutputDeclaration } from '../protocol/streams.js';
import type { OutputRef } from '../result.js';

/** Limits a capture applies. */
export interface CaptureLimits {
  maxLines: number;
  maxBytes: number;
  /** Hard bound on each stream's size; a chunk that would pass it fails the call. */
  maxStreamBytes: number;
  /** How previews are built. @default 'head' */
  preview?: PreviewMode;
  /** With `head+tail`: the tail's share of the lines and bytes. @default 0.5 */
  tailShare?: number;
}

/** What a finished capture published. */
export interface CapturedOutput {
  ref: OutputRef;
  view: OutputView;
  /** Set when a write failed (a full disk): what each stream had accepted, of which the output holds what reached the disk. */
  cut?: { error: unknown; accepted: Array<{ name: string; bytes: number; lines: number }> };
}

interface CapturedStream {
  name: string;
  writer: BlobWriter;
  preview: StreamPreviewBuilder;
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
    this.streams = names.map((name) => ({ name, writer: store.writer(), preview: this.newPreview() }));
  }

  private newPreview(): StreamPreviewBuilder {
    const l = this.limits;
    return new StreamPreviewBuilder(l.maxLines, l.maxBytes, l.preview, l.tailShare);
  }

  /** Whether accepted chunks are kept after they are written: no, they are on disk (the preview copies). */
  readonly keepsChunks = false;

  get size(): number {
    return this.streams.length;
  }

  /** Bytes and lines accepted per stream so far. */
  stats(): Array<{ name: string; bytes: number; lines: number }> {
    return this.streams.map((c) => ({ name: c.name || 'output', bytes: c.writer.bytes, lines: c.writer.lines }));
  }

  /** Accepts a chunk for stream `index` (SizeLimitError past the size bound), settling once on disk, when its credit may go back. */
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
   * Publishes every stream under `pin`; a stream whose write failed keeps what reached the disk ({@link CapturedOutput.cut}).
   * Deferred: on an S3 store the small streams and the manifest go up in one pack object at the pin's vouch,
   * which the call's end awaits before anything refers to them (engine/call/finish.ts).
   */
  async publish(pin: Pin): Promise<CapturedOutput> {
    this.settled = true;
    // Writes still in flight may yet fail: which streams keep only a prefix is known once they end.
    await Promise.all(this.streams.map((c) => c.writer.flushed()));
    const writeError = this.writeError;
    const accepted = writeError === undefined ? undefined : this.stats();
    const infos: BlobInfo[] = [];
    const previewOf = this.streams.map((c) => c.preview);
    try {
      for (const [i, c] of this.streams.entries()) {
        if (c.writer.error === undefined) {
          infos.push(await c.writer.commit(undefined, pin, true));
          continue;
        }
        // The preview must show only kept bytes: it is rebuilt from the prefix as it is read back.
        const rebuilt = this.newPreview();
        previewOf[i] = rebuilt;
        const kept = await c.writer.commitWritten(pin, (chunk) => rebuilt.push(chunk));
        if (kept !== undefined) infos.push(kept);
        else if (this.decl.kind === 'single') throw c.writer.error;
        else infos.push(await this.store.publishBytes(new Uint8Array(0), undefined, pin, true));
      }
      // Only empty streams to show for output that was written: nothing was kept, and the call says so.
      if (writeError !== undefined && infos.every((b) => b.bytes === 0)) throw writeError;
    } catch (err) {
      await this.discard();
      throw err;
    }
    const previews: StreamPreview[] = previewOf.map((p, i) => {
      const info = infos[i] as BlobInfo;
      return p.finish({ bytes: info.bytes, lines: info.lines });
    });
    const cut = writeError === undefined ? {} : { cut: { error: writeError, accepted: accepted ?? [] } };
    if (this.decl.kind === 'single') {
      const info = infos[0] as BlobInfo;
      const shown = previews[0] as StreamPreview;
      return {
        ref: {
          kind: 'single',
          digest: info.digest,
          bytes: info.bytes,
          lines: info.lines,
          truncated: shown.preview.truncated,
        },
        view: { kind: 'single', digest: info.digest, ...shown },
        ...cut,
      };
    }
    const entries = this.streams.map((c, i) => {
      const info = infos[i] as BlobInfo;
      return { name: c.name, digest: info.digest, bytes: info.bytes, lines: info.lines };
    });
    const manifest = await this.store.publishBytes(encodeManifest(entries), undefined, pin, true);
    crashPoint('manifest-renamed');
    return {
      ref: {
        kind: 'streams',
        manifest: manifest.digest,
        streams: entries.map((e, i) => ({ ...e, truncated: (previews[i] as StreamPreview).preview.truncated })),
      },
      view: {
        kind: 'streams',
        manifest: manifest.digest,
        streams: entries.map((e, i) => ({ name: e.name, ...(previews[i] as StreamPreview) })),
      },
      ...cut,
    };
  }

  /** Drops everything; temporary files are removed. */
  async discard(): Promise<void> {
    this.settled = true;
    await Promise.all(this.streams.map((c) => c.writer.abort()));
  }

  get done(): boolean {
    return this.settled;
  }
}
