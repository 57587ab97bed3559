/** One stream's preview in either mode; head and tail share the limits, so the aggregate bound holds in both. */

import type { PreviewMode } from '../protocol/streams.js';
import type { StreamTotals, TailView } from './model-view.js';
import { type Preview, PreviewBuilder, previewFromString } from './preview.js';
import { TailRing } from './tail.js';

export { PREVIEW_MODES, type PreviewMode } from '../protocol/streams.js';

/** A stream's preview as the model view renders it. */
export interface StreamPreview {
  preview: Preview;
  total: StreamTotals;
  tail?: TailView;
}

/** Below this many bytes for either part, a split would show too little of both: head only. */
const MIN_PART_BYTES = 4;

/** The limits of the two parts, or undefined when they cannot be split. */
function split(
  maxLines: number,
  maxBytes: number,
  tailShare: number,
): { headLines: number; headBytes: number; tailLines: number; tailBytes: number } | undefined {
  const tailLines = Math.floor(maxLines * tailShare);
  const tailBytes = Math.floor(maxBytes * tailShare);
  const headLines = maxLines - tailLines;
  const headBytes = maxBytes - tailBytes;
  if (tailLines < 1 || headLines < 1 || tailBytes < MIN_PART_BYTES || headBytes < MIN_PART_BYTES) return undefined;
  return { headLines, headBytes, tailLines, tailBytes };
}

/** Builds one stream's preview from its chunks, in bounded memory (at most `maxBytes` plus the tail's share). */
export class StreamPreviewBuilder {
  private readonly head: PreviewBuilder;
  private readonly ring: TailRing | undefined;
  private readonly parts: ReturnType<typeof split>;

  constructor(maxLines: number, maxBytes: number, mode: PreviewMode = 'head', tailShare = 0.5) {
    this.head = new PreviewBuilder(maxLines, maxBytes);
    this.parts = mode === 'head+tail' ? split(maxLines, maxBytes, tailShare) : undefined;
    this.ring = this.parts ? new TailRing(this.parts.tailBytes) : undefined;
  }

  /** Feeds the next chunk (copied as far as needed, never kept). */
  push(chunk: Uint8Array): void {
    this.head.push(chunk);
    this.ring?.push(chunk);
  }

  /** The preview of the whole stream: every byte pushed, `total` its size. */
  finish(total: StreamTotals): StreamPreview {
    const whole = this.head.finish(total.bytes);
    if (!whole.truncated || !this.parts || !this.ring) return { preview: whole, total };
    // The shorter head is the preview rule applied to the longer one's text: a prefix of the stream.
    const head = previewFromString(whole.text, this.parts.headLines, this.parts.headBytes);
    if (!head.truncated) return { preview: whole, total };
    const headEnd = this.head.rawLineEnd(head.offset);
    const tail = this.ring.finish(total.lines, this.parts.tailLines, headEnd);
    if (!tail || tail.startLine <= head.offset) return { preview: whole, total };
    return {
      preview: head,
      total,
      tail: { text: tail.text, startLine: tail.startLine, omittedBytes: tail.startByte - headEnd },
    };
  }
}
