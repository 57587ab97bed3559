/**
 * One gibibyte through the bash tool: the published stdout digest equals
 * sha256sum of the same bytes computed by a separate pipeline, the blob on
 * disk hashes to its name, and memory stays far below the output size.
 * Nothing here holds the output in memory: every hash is computed streaming.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { blobPath, closeEngines, expectStoreClean, openEngine, sha256 } from '../support/engines.js';

const exec = promisify(execFile);

afterEach(closeEngines);

const GIB = 1024 * 1024 * 1024;
const COMMAND = `yes abcdefghij | head -c ${GIB}`;

async function sha256sum(args: string[]): Promise<string> {
  const { stdout } = await exec('bash', args, { maxBuffer: 1024 * 1024 });
  return stdout.split(/\s/)[0] as string;
}

describe('large output', () => {
  it('1 GiB of bash stdout is published with the digest sha256sum computes for the same bytes', {
    timeout: 180_000,
  }, async () => {
    const { engine } = await openEngine();
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    }, 50);
    const handle = engine.call('bash', { command: COMMAND });
    // The reference digest comes from a separate pipeline, run alongside to save wall time.
    const reference = sha256sum(['-c', `${COMMAND} | sha256sum`]);
    const r = await handle.result.finally(() => clearInterval(sampler));

    expect(r).toMatchObject({ status: 'success', complete: true });
    if (r.output?.kind !== 'streams') throw new Error('expected named streams');
    const [stdout, stderr] = r.output.streams;
    // "abcdefghij\n" is 11 bytes: 97612893 whole lines and one partial line.
    expect(stdout).toMatchObject({ name: 'stdout', bytes: GIB, lines: Math.ceil(GIB / 11), truncated: true });
    expect(stderr).toMatchObject({ name: 'stderr', bytes: 0, digest: sha256('') });

    const expected = await reference;
    expect(stdout?.digest).toBe(expected);
    // The blob on disk is exactly those bytes.
    const onDisk = await sha256sum(['-c', 'sha256sum "$1"', 'hash', blobPath(engine, stdout?.digest as string)]);
    expect(onDisk).toBe(expected);

    // Memory is bounded by the window and previews, not the output.
    expect(handle.maxInFlight).toBeLessThanOrEqual(engine.options.window);
    expect(rssPeak - rssBefore).toBeLessThan(256 * 1024 * 1024);
    // The model sees a bounded preview with a read hint into the stream.
    expect(Buffer.byteLength(r.model)).toBeLessThanOrEqual(engine.options.toolOutput.maxModelBytes);
    expect(r.model).toContain(`artifact://${r.output.manifest}/stdout`);
    await expectStoreClean(engine);
  });
});
