import { describe, expect, it } from 'vitest';
import { elisionMarker, LiveDisplay, MIN_LIVE_DISPLAY_BYTES } from '../../engine/presentation/display.js';
import { byteLength } from './support.js';

describe('live display', () => {
  it('is the concatenation of delta display texts', () => {
    const d = new LiveDisplay();
    d.append('compiling ');
    d.append('a.ts\n');
    d.append('');
    d.append('compiling b.ts\n');
    expect(d.text).toBe('compiling a.ts\ncompiling b.ts\n');
    expect(d.elidedBytes).toBe(0);
    expect(d.maxBytes).toBe(65536);
  });

  it('starts empty', () => {
    expect(new LiveDisplay().text).toBe('');
  });

  it('keeps everything exactly at the bound, without a marker', () => {
    const d = new LiveDisplay(200);
    d.append('a'.repeat(150));
    d.append('b'.repeat(50));
    expect(d.text).toBe(`${'a'.repeat(150)}${'b'.repeat(50)}`);
    expect(d.elidedBytes).toBe(0);
  });

  it('one byte over the bound keeps the newest text behind an elision marker, within the bound', () => {
    const d = new LiveDisplay(200);
    d.append('a'.repeat(150));
    d.append('b'.repeat(51));
    const marker = elisionMarker(d.elidedBytes);
    expect(d.text.startsWith(marker)).toBe(true);
    expect(d.text.endsWith('b'.repeat(51))).toBe(true);
    expect(byteLength(d.text)).toBeLessThanOrEqual(200);
    // Nothing is lost silently: kept + elided = appended.
    expect(d.retainedBytes + d.elidedBytes).toBe(201);
    expect(d.text).toBe(`${marker}${'a'.repeat(150 - d.elidedBytes)}${'b'.repeat(51)}`);
  });

  it('formats the elision marker', () => {
    expect(elisionMarker(1234)).toBe('[… 1234 earlier bytes of display elided]\n');
  });

  it('stays bounded however much is appended, and keeps the newest', () => {
    const d = new LiveDisplay(1024);
    let total = 0;
    for (let i = 0; i < 20_000; i++) {
      const line = `progress ${i}\n`;
      d.append(line);
      total += byteLength(line);
      expect(byteLength(d.text)).toBeLessThanOrEqual(1024);
    }
    expect(d.text.endsWith('progress 19999\n')).toBe(true);
    expect(d.retainedBytes + d.elidedBytes).toBe(total);
    expect(d.text.startsWith(`[… ${d.elidedBytes} earlier bytes of display elided]\n`)).toBe(true);
  });

  it('keeps only the tail of one huge append', () => {
    const d = new LiveDisplay(1024);
    d.append(`${'x'.repeat(5_000_000)}END`);
    expect(byteLength(d.text)).toBeLessThanOrEqual(1024);
    expect(d.text.endsWith('xEND')).toBe(true);
    expect(d.retainedBytes + d.elidedBytes).toBe(5_000_003);
  });

  it('never splits a multi-byte character or a surrogate pair when eliding', () => {
    for (const ch of ['é', '€', '😀']) {
      for (let bound = MIN_LIVE_DISPLAY_BYTES; bound < MIN_LIVE_DISPLAY_BYTES + 8; bound++) {
        const d = new LiveDisplay(bound);
        for (let i = 0; i < 100; i++) d.append(ch.repeat(3));
        const body = d.text.slice(d.text.indexOf('\n') + 1);
        expect(body).toBe(ch.repeat(body.length / ch.length));
        expect(byteLength(d.text)).toBeLessThanOrEqual(bound);
        expect(d.retainedBytes + d.elidedBytes).toBe(100 * 3 * byteLength(ch));
      }
      const big = new LiveDisplay(MIN_LIVE_DISPLAY_BYTES + 1);
      big.append(ch.repeat(10_000));
      const body = big.text.slice(big.text.indexOf('\n') + 1);
      expect(body).toBe(ch.repeat(body.length / ch.length));
    }
  });

  it('rejects a bound too small for the marker', () => {
    expect(() => new LiveDisplay(MIN_LIVE_DISPLAY_BYTES - 1)).toThrow(RangeError);
  });
});

describe('live display cost', () => {
  it('takes a million small deltas into a 64 KiB display, keeping its bound and three quarters of its room', () => {
    // Its cost (amortised O(appended)) is a property of the trimming rule, not asserted as a time here:
    // timed assertions fail on a shared machine.
    const d = new LiveDisplay();
    for (let i = 0; i < 1_000_000; i++) d.append('0123456789');
    expect(d.retainedBytes + d.elidedBytes).toBe(10_000_000);
    expect(byteLength(d.text)).toBeLessThanOrEqual(65536);
    // At least three quarters of the room after the marker is kept.
    expect(d.retainedBytes).toBeGreaterThanOrEqual(Math.floor((65536 - 64) * 0.75));
  });
});

describe('live display elision lands on a line start', () => {
  it('drops the rest of a cut line so the display resumes at a whole line', () => {
    const d = new LiveDisplay(256);
    for (let i = 0; i < 40; i++) d.append(`step ${i}\n`);
    const [marker, ...rest] = d.text.split('\n');
    expect(marker).toBe(`[… ${d.elidedBytes} earlier bytes of display elided]`);
    expect(rest[0]).toMatch(/^step \d+$/);
    expect(d.text.endsWith('step 39\n')).toBe(true);
    expect(d.retainedBytes + d.elidedBytes).toBe(Array.from({ length: 40 }, (_, i) => `step ${i}\n`).join('').length);
  });

  it('also when deltas do not end at line ends', () => {
    const d = new LiveDisplay(256);
    for (let i = 0; i < 40; i++) {
      d.append(`st`);
      d.append(`ep ${i}\nx`);
      d.append(`y\n`);
    }
    const lines = d.text.split('\n').slice(1, -1);
    for (const l of lines) expect(l).toMatch(/^(step \d+|xy)$/);
  });

  it('keeps a long partial line rather than dropping it', () => {
    const d = new LiveDisplay(256);
    d.append('z'.repeat(2000));
    expect(d.text).toBe(`[… ${d.elidedBytes} earlier bytes of display elided]\n${'z'.repeat(d.retainedBytes)}`);
    expect(d.retainedBytes).toBeGreaterThan(100);
  });
});
