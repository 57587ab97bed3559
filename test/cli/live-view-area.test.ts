/**
 * The live status area's content, without a terminal: what it draws for
 * display deltas and progress counts (complete lines only, the last four,
 * clipped to the width with wide characters counted twice), and how the
 * final display replaces it (erase exactly the rows drawn, then the final
 * display). The clock is injected: nothing here depends on timing.
 */
import { describe, expect, it } from 'vitest';
import { clip, LIVE_LINES, LiveView } from '../../cli/live-view.js';

function view(columns = 80, now = 0) {
  const writes: string[] = [];
  let t = now;
  const v = new LiveView({ write: (s: string) => writes.push(s), columns }, 'bash', { now: () => t, startedAt: 0 });
  return { v, writes, tick: (ms: number) => (t = ms) };
}

describe('the live status area', () => {
  it('shows complete display lines only, the last four, under the clock and the counts', () => {
    const { v, tick } = view();
    v.display('row 1\nrow 2\npart');
    tick(12_400);
    v.progress([
      { name: 'stdout', bytes: 48_128, lines: 912 },
      { name: 'stderr', bytes: 0, lines: 0 },
    ]);
    const [head, ...rest] = v.lines();
    expect(head).toMatch(/^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] bash · 12\.4 s · stdout 47\.0 KiB in 912 lines · stderr empty$/);
    expect(rest).toEqual(['  │ row 1', '  │ row 2']);
    v.display('ial\nrow 4\nrow 5\nrow 6\n');
    expect(v.lines().slice(1)).toEqual(['  │ partial', '  │ row 4', '  │ row 5', '  │ row 6']);
    expect(v.lines()).toHaveLength(1 + LIVE_LINES);
  });

  it('names a single output "output" and sanitises what it shows', () => {
    const { v } = view();
    v.progress([{ name: '', bytes: 1, lines: 1 }]);
    v.display('\x1b[31mred\x1b[0m\r\n');
    expect(v.lines()[0]).toMatch(/ · output 1 B in 1 line$/);
    expect(v.lines()[1]).toBe('  │ ␛[31mred␛[0m');
  });

  it('drops a partial line too long to ever show whole, until its newline', () => {
    const { v } = view();
    v.display('x'.repeat(20_000));
    v.display('y'.repeat(100));
    v.display('z\nnext\n');
    expect(v.lines().slice(1)).toEqual(['  │ next']);
  });

  it('clips to the width, wide characters counting two columns, so no drawn line wraps', () => {
    expect(clip('abc', 3)).toBe('abc');
    expect(clip('abcdef', 4)).toBe('abc…');
    expect(clip('日本語テキスト', 7)).toBe('日本語…');
    expect(clip('😀😀😀', 5)).toBe('😀😀…');
    const { v } = view(30);
    v.display(`${'w'.repeat(100)}\n`);
    for (const line of v.lines()) expect([...line].length).toBeLessThanOrEqual(29);
  });

  it('a terminal that reports 0 columns gets 79, as the progress line does, not a 20-column clip', () => {
    for (const columns of [0, undefined]) {
      const { v } = view(columns as number);
      v.display(`${'w'.repeat(100)}\n`);
      expect(v.lines()[1]).toBe(`  │ ${'w'.repeat(79 - 5)}…`);
    }
  });

  it('is replaced by the final display: the rows drawn are erased, then the final display is written', () => {
    const { v, writes } = view();
    v.display('one\ntwo\n');
    v.start();
    v.finish('exit code 0 · stdout 8 B');
    // The first draw (3 rows: head and two lines), then the erase of exactly those rows and the final display.
    expect(writes[0]?.split('\n')).toHaveLength(4);
    expect(writes.at(-1)).toBe('\x1b[3A\r\x1b[Jexit code 0 · stdout 8 B\n');
    // Nothing is drawn after the end.
    const count = writes.length;
    v.display('late\n');
    v.finish('again');
    expect(writes).toHaveLength(count);
  });
});
