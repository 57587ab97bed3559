/**
 * A recorded call's started record is appended beside the call's dispatch,
 * not before it: the tool runs while that (unsynced) write is still waiting
 * in the session log's queue, yet the log still holds started before
 * completed, the output is published only once the started record is
 * written, and a started record that cannot be written fails the call with
 * EDISK, publishes nothing and stops its tool.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import type { StoreFile } from '../../store/file.js';
import { realIO, type StoreIO } from '../../store/io.js';
import {
  closeEngines,
  expectStoreClean,
  openEngine,
  streamBytes,
  uniqueSleep,
  waitNoProcess,
} from '../support/engines.js';
import { tag } from '../support/invariants.js';

afterEach(closeEngines);

const has = (b: NodeJS.ArrayBufferView, text: string) =>
  Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1').includes(text);

/**
 * realIO whose write of a `call.started` line waits for `release()`, or,
 * with `fail`, whose first such write is refused with EIO. Records the order
 * of the log's writes.
 */
function startGate(fail = false) {
  let refused = false;
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  const order: string[] = [];
  let heldWrites = 0;
  const io: StoreIO = {
    ...realIO,
    write: async (fh: StoreFile, buf: Uint8Array, off: number, len: number, position: number | null) => {
      if (has(buf, '"call.started"')) {
        if (fail && !refused) {
          refused = true;
          order.push('started refused');
          throw Object.assign(new Error('EIO: injected fault, write'), { code: 'EIO', syscall: 'write', errno: -5 });
        }
        if (!fail) {
          heldWrites++;
          await opened;
        }
        order.push('started');
      } else if (has(buf, '"call.completed"')) order.push('completed');
      return realIO.write(fh, buf, off, len, position);
    },
  };
  return { io, release: open, order, held: () => heldWrites };
}

describe('the started record beside the dispatch', () => {
  it('the tool runs while the started write is held; the log still has started before completed', async () => {
    const gate = startGate();
    const { engine, dir } = await openEngine({ io: gate.io });
    const marker = join(dir, `ran-${tag()}`);
    const session = `s-${tag()}`;
    const h = engine.call('bash', { command: `echo ran > ${marker}; echo out` }, { session });
    // The tool has run (its side effect is on disk) although its started record is not written yet.
    for (let i = 0; i < 600; i++) {
      const seen = await fsp.readFile(marker, 'utf8').catch(() => '');
      if (seen === 'ran\n') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await fsp.readFile(marker, 'utf8')).toBe('ran\n');
    expect(gate.held()).toBe(1);
    expect(gate.order).toEqual([]);
    gate.release();
    const r = await h.result;
    expect(r.status).toBe('success');
    expect((await streamBytes(engine, r)).stdout).toBe('out\n');
    expect(gate.order).toEqual(['started', 'completed']);
    const log = await readEventLog(engine.store, session);
    expect(log.records.map((x) => x.type)).toEqual(['call.started', 'call.completed']);
    await expectStoreClean(engine);
  });

  it('a started record that cannot be written fails the call with EDISK and stops its tool', async () => {
    const gate = startGate(true);
    const { engine } = await openEngine({ io: gate.io });
    const s = uniqueSleep();
    const session = `s-${tag()}`;
    const r = await engine.run('bash', { command: s.command }, { session });
    expect(r.status).toBe('failed');
    expect(r.error?.code).toBe('EDISK');
    // Nothing of what the tool may have written is published.
    expect(r.output).toBeNull();
    expect(gate.order[0]).toBe('started refused');
    // Whether the sleep got to start or not, nothing of it is left running.
    expect(await waitNoProcess(s.marker)).toEqual([]);
    // The failed call is recorded as what the caller got (the failed write may leave a torn line, skipped).
    const log = await readEventLog(engine.store, session);
    const done = log.records.filter((x) => x.type === 'call.completed');
    expect(done).toHaveLength(1);
    expect((done[0] as { status?: string }).status).toBe('failed');
    await expectStoreClean(engine);
    // The engine serves the next recorded call.
    const next = await engine.run('bash', { command: 'echo next' }, { session: `t-${tag()}` });
    expect(next.status).toBe('success');
    await expectStoreClean(engine);
  });
});
