/**
 * The SDK tour in docs/sdk.md is real: the page shows the example program and
 * its plugin tool exactly as they are in test/fixtures/sdk/, and running the
 * program (against the built package, imported as `sluice`) prints exactly
 * the output the page shows, exits 0 and leaves no process behind.
 */
import { execFile } from 'node:child_process';
import { promises as fsp, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SDK = join(ROOT, 'test', 'fixtures', 'sdk');
const doc = readFileSync(join(ROOT, 'docs', 'sdk.md'), 'utf8');

let dir: string | undefined;
afterEach(async () => {
  if (dir) await fsp.rm(dir, { recursive: true, force: true });
  dir = undefined;
});

/** PIDs whose command line contains `marker`. */
async function pgrep(marker: string): Promise<number[]> {
  try {
    const { stdout } = await run('pgrep', ['-f', marker]);
    return stdout.split('\n').filter(Boolean).map(Number);
  } catch (err) {
    if ((err as { code?: unknown }).code === 1) return [];
    throw err;
  }
}

describe('docs/sdk.md', () => {
  it('shows the example program and its plugin tool verbatim', () => {
    for (const file of ['example.mjs', 'word-count.mjs']) {
      const text = readFileSync(join(SDK, file), 'utf8');
      expect(doc.includes(`\`\`\`js\n${text}\`\`\``), `${file} differs from its copy in docs/sdk.md`).toBe(true);
    }
  });

  it('the example runs and prints what the page says', async () => {
    dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-sdk-'));
    const { stdout } = await run(process.execPath, [join(SDK, 'example.mjs')], {
      cwd: dir,
      env: { ...process.env, SLUICE_STORE: join(dir, 'store') },
      timeout: 50_000,
    });
    const shown = /It prints:\n\n```text\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(stdout).toBe(shown);
    expect(await pgrep(join(SDK, 'mcp-upper.mjs'))).toEqual([]);
    expect(await fsp.readdir(join(dir, 'store', 'tmp'))).toEqual([]);
    expect(await fsp.readdir(join(dir, 'store', 'pins'))).toEqual([]);
  });
});
