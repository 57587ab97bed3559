/**
 * Every text a tool hands back besides its output is bounded before it
 * leaves the worker (docs/tools.md, "Bounds"): over its bound a text is cut
 * on a code point with a marker saying how much was cut, and an error's
 * message and the final display, whose whole matters, are kept whole as
 * artifacts the result references (GC roots while the call is live).
 *
 * Regression: a tool throwing `new Error('E'.repeat(30e6))` put 30 MB into
 * the terminal result, the completed event and the session log.
 */
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { COMPLETION_BOUNDS } from '../../engine/protocol/limits.js';
import { cutMarkerBytes } from '../../engine/protocol/text.js';
import { closeEngines, engineWith, expectStoreClean } from '../support/engines.js';

afterEach(closeEngines);

/** SHA-256 of `char` repeated `times` times, hashed a piece at a time. */
function repeatedDigest(char: string, times: number): string {
  const h = createHash('sha256');
  const piece = Buffer.from(char.repeat(1 << 20));
  for (let left = times; left > 0; left -= 1 << 20) h.update(left >= 1 << 20 ? piece : piece.subarray(0, left));
  return h.digest('hex');
}

describe('error messages', () => {
  it('a 30 MB thrown message is cut to 16 KiB with a marker, kept whole as an artifact, and the log stays small', async () => {
    const { engine } = await engineWith(['script-single']);
    const times = 30_000_000;
    const r = await engine.run('script-single', { big: { field: 'throw', char: 'E', times } }, { session: 's1' });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'ETOOLFAILED' } });
    const whole = r.fullText?.error;
    expect(whole).toEqual({ digest: repeatedDigest('E', times), bytes: times });
    const message = r.error?.message as string;
    // The marker counts against the 16 KiB: the message, marker included, stays within it.
    const kept = COMPLETION_BOUNDS.errorMessageBytes - cutMarkerBytes(times);
    expect(message).toBe(
      `${'E'.repeat(kept)}… [${times - kept} more bytes cut; the whole text: read(filePath="artifact://${whole?.digest}")]`,
    );
    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(COMPLETION_BOUNDS.errorMessageBytes);
    // The model's status line keeps the whole error's address after its clipped detail.
    expect(r.model).toContain(`The whole error: read(filePath="artifact://${whole?.digest}")`);
    expect(Buffer.byteLength(r.model)).toBeLessThan(1024);
    const page = await engine.store.readPage(`artifact://${whole?.digest}`);
    expect(page).toMatchObject({ totalLines: 1, nextOffset: 0, nextByteOffset: 2 * 1024 * 1024 });
    const log = await fsp.stat(join(engine.store.layout.sessions, 's1.log')).catch(() => undefined);
    const size = log?.size ?? (await sessionLogSize(engine.store.layout.sessions));
    expect(size).toBeLessThan(64 * 1024);
    // Replay gives back the same bounded error and the same reference.
    const replayed = await engine.replay('s1');
    expect(replayed.calls[0]?.result).toMatchObject({ error: { message }, fullText: { error: whole } });
    // A GC root while the call is live.
    await engine.gc({ graceMs: 0 });
    expect(await engine.store.hasBlob(whole?.digest as string)).toBe(true);
    await expectStoreClean(engine);
  });

  it('a completion error over the bound is cut the same way, and its display stands', async () => {
    const { engine } = await engineWith(['script-single']);
    const r = await engine.run('script-single', {
      big: { field: 'error', char: 'é', times: 20_000 },
      finalDisplay: 'own display',
    });
    expect(r).toMatchObject({ status: 'failed', display: 'own display', error: { code: 'ETOOLFAILED' } });
    // 'é' is 2 bytes: what fits before the marker is whole characters only.
    const kept = Math.floor((16_384 - cutMarkerBytes(40_000)) / 2);
    expect(r.error?.message.startsWith(`${'é'.repeat(kept)}… [${40_000 - 2 * kept} more bytes cut;`)).toBe(true);
    expect(r.fullText?.error?.bytes).toBe(40_000);
  });

  it('error details over 16 KiB of JSON are replaced by a cut of their JSON', async () => {
    const { engine } = await engineWith(['script-single']);
    const r = await engine.run('script-single', { big: { field: 'details', char: 'd', times: 100_000 } });
    const details = r.error?.details as { cut: string; bytes: number };
    expect(details.bytes).toBe(100_000 + '{"big":""}'.length);
    expect(details.cut.startsWith('{"big":"ddd')).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(details))).toBeLessThan(COMPLETION_BOUNDS.errorDetailsBytes);
  });

  it("a tool's own error code outside sluice's set is kept in details.toolCode, thrown or reported", async () => {
    const { engine } = await engineWith(['script-single']);
    const thrown = await engine.run('script-single', { throwMessage: 'mine', throwCode: 'EMINE' });
    expect(thrown.error).toEqual({ code: 'ETOOLFAILED', message: 'mine', details: { toolCode: 'EMINE' } });
    const reported = await engine.run('script-single', {
      error: { code: 'EMINE', message: 'reported' },
      finalDisplay: 'shown',
    });
    expect(reported).toMatchObject({
      status: 'failed',
      display: 'shown',
      error: { code: 'ETOOLFAILED', message: 'reported', details: { toolCode: 'EMINE' } },
    });
    // A code of sluice's own passes through as it is.
    const own = await engine.run('script-single', { throwMessage: 'gone', throwCode: 'ENOTFOUND' });
    expect(own.error?.code).toBe('ENOTFOUND');
  });
});

describe('whole texts over their lifetime', () => {
  it('a reverted call stops keeping its whole error text: the next collection removes it', async () => {
    const { engine } = await engineWith(['script-single']);
    const r = await engine.run(
      'script-single',
      { big: { field: 'throw', char: 'R', times: 200_000 } },
      { session: 'rv' },
    );
    const whole = r.fullText?.error?.digest as string;
    expect(await engine.store.hasBlob(whole)).toBe(true);
    await engine.gc({ graceMs: 0 });
    expect(await engine.store.hasBlob(whole)).toBe(true);
    await engine.revert('rv', r.callId);
    await engine.gc({ graceMs: 0 });
    expect(await engine.store.hasBlob(whole)).toBe(false);
    await expectStoreClean(engine);
  });

  it('a cancelled call stops sending its whole text at once, and keeps none of it', async () => {
    // A grace period far longer than the test: the call must end because the worker stopped, not because it was killed.
    const { engine } = await engineWith(['script-single'], { graceMs: 120_000 });
    const handle = engine.call('script-single', {
      steps: [{ text: 'started\n', display: 'ready' }, { sleepMs: 50 }],
      big: { field: 'error', char: 'C', times: 100_000_000 },
    });
    for await (const ev of handle.events()) if (ev.type === 'display') handle.cancel('stop');
    const r = await handle.result;
    expect(r).toMatchObject({ status: 'cancelled', error: { code: 'ECANCELLED' } });
    expect(r.fullText).toBeUndefined();
    await expectStoreClean(engine);
  }, 60_000);
});

describe('other fields', () => {
  it('a final display over liveDisplayBytes is cut with a marker and kept whole', async () => {
    const { engine } = await engineWith(['script-single'], { liveDisplayBytes: 4096 });
    const r = await engine.run('script-single', { big: { field: 'display', char: 'x', times: 100_000 } });
    expect(r.status).toBe('success');
    const whole = r.fullText?.display;
    expect(whole).toEqual({ digest: repeatedDigest('x', 100_000), bytes: 100_000 });
    // The marker counts against the bound: room for it (with the whole's size in digits) is kept.
    const kept = 4096 - cutMarkerBytes(100_000);
    expect(r.display).toBe(
      `${'x'.repeat(kept)}… [${100_000 - kept} more bytes cut; the whole text: read(filePath="artifact://${whole?.digest}")]`,
    );
    expect(Buffer.byteLength(r.display)).toBeLessThanOrEqual(4096);
  });

  it('a note over 1000 characters is cut, not a protocol error', async () => {
    const { engine } = await engineWith(['script-single']);
    const r = await engine.run('script-single', { big: { field: 'note', char: 'n', times: 5000 } });
    expect(r.status).toBe('failed');
    expect(r.error).toBeUndefined();
    expect(r.model).toMatch(/^\[Status: failed\. n{600,700}…\.\]$/);
  });

  it('an emitted message over 64 KiB is cut with a marker; more than 64 messages fail with ERESOURCELIMIT', async () => {
    const { engine } = await engineWith(['script-single']);
    const r = await engine.run('script-single', { big: { field: 'message', char: 'm', times: 100_000 } });
    expect(r.status).toBe('success');
    expect(r.messages[0]?.content).toBe(`${'m'.repeat(65_536)}… [${100_000 - 65_536} more bytes cut]`);
    const many = await engine.run('script-single', {
      messages: Array.from({ length: 65 }, () => ({ role: 'user' as const, content: 'hi' })),
    });
    expect(many).toMatchObject({ status: 'failed', error: { code: 'ERESOURCELIMIT' } });
  });

  it('metadata over 1 MiB of JSON fails with ERESOURCELIMIT before it leaves the worker', async () => {
    const { engine } = await engineWith(['script-single']);
    const r = await engine.run('script-single', { big: { field: 'metadata', char: 'q', times: 2_000_000 } });
    expect(r).toMatchObject({ status: 'failed', error: { code: 'ERESOURCELIMIT' }, metadata: {} });
    await expectStoreClean(engine);
  });
});

async function sessionLogSize(dir: string): Promise<number> {
  let total = 0;
  for (const name of await fsp.readdir(dir, { recursive: true })) {
    const st = await fsp.stat(join(dir, String(name)));
    if (st.isFile()) total += st.size;
  }
  return total;
}
