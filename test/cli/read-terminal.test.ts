/**
 * `sluice read` on a terminal, where stdout and stderr share one screen: a
 * page shown as text that does not end with a newline gets one, so the
 * notes on stderr (not UTF-8, past the end, how to continue) start on a
 * line of their own.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { command } from '../../cli/read.js';
import { tempStore, tmpEntries } from '../store/helpers.js';

/** One terminal for both streams: what a person would see, in order. */
function terminal(): { tty: PassThrough & { isTTY: true }; screen: () => string } {
  const tty = Object.assign(new PassThrough(), { isTTY: true as const });
  const chunks: Buffer[] = [];
  tty.on('data', (b: Buffer) => chunks.push(b));
  return { tty, screen: () => Buffer.concat(chunks).toString('utf8') };
}

describe('sluice read on a terminal', () => {
  it('puts the lossy note on its own line after a last line without a newline', async () => {
    const store = await tempStore();
    const blob = await store.publishBytes(Buffer.from([0x6f, 0x6b, 0x0a, 0x62, 0x61, 0x64, 0xff]));
    const { tty, screen } = terminal();
    const code = await command.run([`artifact://${blob.digest}`, '--store', store.root], {
      stdout: tty,
      stderr: tty,
      env: {},
    });
    expect(code).toBe(0);
    expect(screen()).toBe(
      'ok\nbad\uFFFD\nsluice read: the page holds bytes that are not UTF-8, shown as U+FFFD; --raw writes them exactly\n',
    );
    expect(await tmpEntries(store)).toEqual([]);
    await store.close();
  });

  it('adds nothing to a page that ends with its newline, and nothing when piped', async () => {
    const store = await tempStore();
    const blob = await store.publishBytes('one\ntwo');
    const { tty, screen } = terminal();
    await command.run([`artifact://${blob.digest}`, '--store', store.root], { stdout: tty, stderr: tty, env: {} });
    expect(screen()).toBe('one\ntwo\n');
    const pipe = new PassThrough();
    const piped: Buffer[] = [];
    pipe.on('data', (b: Buffer) => piped.push(b));
    await command.run([`artifact://${blob.digest}`, '--store', store.root], { stdout: pipe, stderr: pipe, env: {} });
    expect(Buffer.concat(piped).toString('utf8')).toBe('one\ntwo');
    const ended = await store.publishBytes('one\n');
    const t2 = terminal();
    await command.run([`artifact://${ended.digest}`, '--store', store.root], {
      stdout: t2.tty,
      stderr: t2.tty,
      env: {},
    });
    expect(t2.screen()).toBe('one\n');
    await store.close();
  });
});
