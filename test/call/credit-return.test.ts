/**
 * When the engine returns credit (engine/call/intake.ts): a quarter window
 * or more as soon as it is on disk, at the end of the microtask queue; less
 * once the messages already waiting have been handled (setImmediate), so a
 * small call whose completion arrives with its output ends without a credit
 * message. Nothing is withheld: every byte's credit goes back in the same
 * turn of the event loop, and a producer of many small chunks through a
 * small window still finishes (no deadlock).
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Capture } from '../../engine/call/capture.js';
import { FullTexts } from '../../engine/call/full-text.js';
import { Intake } from '../../engine/call/intake.js';
import { Store } from '../../store/store.js';
import { tempDir, tmpEntries } from '../store/helpers.js';
import { closeEngines, engineWith, expectStoreClean, floodDigest } from '../support/engines.js';

afterEach(closeEngines);

const WINDOW = 64 * 1024;

/** An intake over a real capture in a fresh store, recording the credit it sends. */
async function intake(): Promise<{
  store: Store;
  capture: Capture;
  intake: Intake;
  sent: number[];
  ended: () => void;
}> {
  const store = await Store.open(join(await tempDir(), 'store'));
  const capture = new Capture(store, { kind: 'single' }, { maxLines: 10, maxBytes: 1024, maxStreamBytes: 1 << 30 });
  const sent: number[] = [];
  let over = false;
  const i = new Intake(capture, new FullTexts(store, { maxBytes: 1 << 30 }), {
    failed: () => false,
    stopping: () => false,
    fail: (err) => {
      throw err;
    },
    // As the call does: nothing is sent once the call has ended.
    sendCredit: (n) => {
      if (!over) sent.push(n);
    },
    window: WINDOW,
  });
  return { store, capture, intake: i, sent, ended: () => (over = true) };
}

/** Until the accepted bytes are written: the capture settles its writes in the microtask queue or on I/O. */
async function drainMicrotasks(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

function turn(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

describe('credit return', () => {
  it('sends the credit of a small chunk after the waiting messages, once, for all of them', async () => {
    const { store, capture, intake: i, sent } = await intake();
    i.chunk(0, Buffer.from('a'.repeat(100)));
    i.chunk(0, Buffer.from('b'.repeat(50)));
    await drainMicrotasks();
    // Written, but not yet returned: a completion handled in this turn would make the message unneeded.
    expect(sent).toEqual([]);
    await turn();
    expect(sent).toEqual([150]);
    await capture.discard();
    expect(await tmpEntries(store)).toEqual([]);
    await store.close();
  });

  it('sends nothing for a small chunk when the call ends in the same turn', async () => {
    const { store, capture, intake: i, sent, ended } = await intake();
    i.chunk(0, Buffer.from('x'.repeat(100)));
    await drainMicrotasks();
    ended();
    await turn();
    await turn();
    expect(sent).toEqual([]);
    await capture.discard();
    expect(await tmpEntries(store)).toEqual([]);
    await store.close();
  });

  it('sends a quarter window or more as soon as it is written, before the turn ends', async () => {
    const { store, capture, intake: i, sent } = await intake();
    i.chunk(0, Buffer.alloc(WINDOW / 4, 0x61));
    // Written asynchronously (a capture file once past the pack bound), but within the microtask queue or I/O:
    // wait for the credit itself, and check it came as one message of the whole chunk.
    for (let k = 0; k < 100 && sent.length === 0; k++) await drainMicrotasks();
    expect(sent).toEqual([WINDOW / 4]);
    await capture.discard();
    expect(await tmpEntries(store)).toEqual([]);
    await store.close();
  });

  it('a producer of many small writes through a small window finishes with every byte', async () => {
    // 1000-byte blocks: each write's credit is far below a quarter of the window, so it goes back after the turn.
    const { engine } = await engineWith(['flood'], { window: 64 * 1024 });
    const bytes = 4 * 1024 * 1024;
    const r = await engine.run('flood', { bytes, blockSize: 1000 });
    expect(r).toMatchObject({ status: 'success', complete: true });
    expect(r.output).toMatchObject({ kind: 'single', bytes, digest: floodDigest(bytes, 1000) });
    await expectStoreClean(engine);
  });
});
