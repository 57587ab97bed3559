/** Publishing what a call accepted, at its end: the capture's artifacts (or a page, not stored) with their model view, and whole texts of cut fields. */
import type { Pin, Store } from '../../store/store.js';
import { renderModelView } from '../presentation/model-view.js';
import { renderPageView } from '../presentation/page-view.js';
import type { TextKind } from '../protocol/messages.js';
import type { FullTextRefs, OutputRef } from '../result.js';
import type { Capture } from './capture.js';
import type { FullTexts } from './full-text.js';
import { PageCapture } from './page-capture.js';

/** What was published, the model view it gives, and the pin that protects it until it is recorded. */
export interface Published {
  output: OutputRef | null;
  model: string;
  pin: Pin | undefined;
  /** A write failed: the output holds only what reached the disk of what each stream accepted. */
  cut?: { error: unknown; accepted: Array<{ name: string; bytes: number; lines: number }> };
}

/** Publishes what `capture` accepted; an abnormal end before any output publishes nothing. Throws, having discarded all, when nothing can be published. */
export async function publishAccepted(
  capture: Capture | PageCapture,
  store: Store,
  opts: { ended: boolean; pageMetadata: Record<string, unknown> | undefined },
): Promise<Published> {
  if (capture instanceof PageCapture) {
    const page = capture.text();
    // The continuation line comes from the tool's metadata; output.bytes stays the page alone.
    return {
      output: { kind: 'page', bytes: page.bytes, lines: page.lines },
      model: renderPageView(page.text, opts.pageMetadata),
      pin: undefined,
    };
  }
  if (!opts.ended && capture.stats().every((c) => c.bytes === 0)) {
    // Bad arguments, denied, crashed early.
    await capture.discard();
    return { output: null, model: '', pin: undefined };
  }
  let pin: Pin | undefined;
  try {
    pin = await store.pin();
    const captured = await capture.publish(pin);
    const cut = captured.cut ? { cut: captured.cut } : {};
    return { output: captured.ref, model: renderModelView(captured.view), pin, ...cut };
  } catch (err) {
    await capture.discard();
    await pin?.release();
    throw err;
  }
}

/** Publishes the whole texts of the fields in `shown` under the output's pin or a new one; never fails the call (a whole text is an extra). */
export async function keepFullTexts(
  texts: FullTexts,
  store: Store,
  pin: Pin | undefined,
  shown: Partial<Record<TextKind, number | undefined>>,
): Promise<{ refs: FullTextRefs; pin: Pin | undefined }> {
  const expected: Partial<Record<TextKind, number>> = {};
  for (const [k, v] of Object.entries(shown)) if (v !== undefined) expected[k as TextKind] = v;
  if (!texts.any) return { refs: {}, pin };
  if (Object.keys(expected).length === 0) {
    await texts.discard();
    return { refs: {}, pin };
  }
  let held = pin;
  try {
    held ??= await store.pin();
  } catch {
    await texts.discard();
    return { refs: {}, pin };
  }
  return { refs: await texts.publish(held, expected), pin: held };
}
