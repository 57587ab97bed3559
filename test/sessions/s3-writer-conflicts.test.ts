/**
 * A session writer on S3 whose conditional PUT meets a racing conditional
 * write (a real Ceph RGW, with the answer AWS gives then, 409
 * ConditionalRequestConflict, injected at the client): the batch is stored
 * at the number it tried, the session's numbers stay dense, and the append
 * resolves instead of failing with EDISK.
 */
import { describe, expect, it } from 'vitest';
import { frameLine, loadHasher } from '../../engine/sessions/frame.js';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { s3RecordsOf } from '../../engine/sessions/s3-batch.js';
import { S3LogWriter } from '../../engine/sessions/s3-log-writer.js';
import type { S3Objects } from '../../store/s3/objects.js';
import { s3Service } from '../support/s3.js';
import { expectNoLeaks, keysUnder, twoStores } from './s3-hosts.js';

const s3 = await s3Service();

interface Sendable {
  send(command: { constructor: { name: string } }): Promise<unknown>;
}

/** `objects` with a client whose first PutObject fails as AWS fails a conditional PUT that raced another. */
function withOneConflict(objects: S3Objects): { objects: S3Objects; conflicts: () => number } {
  const real = (objects as unknown as { client: Sendable }).client;
  let conflicts = 0;
  const client: Sendable = {
    send(command) {
      if (command.constructor.name === 'PutObjectCommand' && conflicts === 0) {
        conflicts++;
        const err = Object.assign(new Error('A conflicting conditional operation is currently in progress'), {
          name: 'ConditionalRequestConflict',
          $metadata: { httpStatusCode: 409 },
        });
        return Promise.reject(err);
      }
      return real.send(command);
    },
  };
  const wrapped = Object.create(objects, { client: { value: client } }) as S3Objects;
  return { objects: wrapped, conflicts: () => conflicts };
}

describe.runIf(s3)('S3 session writer and racing conditional writes', () => {
  it('a PUT answered 409 ConditionalRequestConflict is tried again at the same number', async () => {
    const { a, b, prefix, dir } = await twoStores(s3!);
    const records = s3RecordsOf(a);
    if (!records) throw new Error('not an S3 store');
    const { objects, conflicts } = withOneConflict(records.objects);
    const writer = await S3LogWriter.open({ ...records, objects }, 'c');
    const h = await loadHasher();
    const at = new Date(0).toISOString();
    const line = (before: string) => frameLine(h, JSON.stringify({ type: 'session.revert', before, at }));
    await writer.append(line('x'), true);
    await writer.append(line('y'), true);
    await writer.close();
    expect(conflicts()).toBe(1);
    expect(await keysUnder(s3!, `${prefix}/sessions/c/`)).toEqual([
      `${prefix}/sessions/c/000000000000`,
      `${prefix}/sessions/c/000000000001`,
    ]);
    const read = await readEventLog(b, 'c');
    expect(read).toMatchObject({ corrupt: 0, invalid: 0 });
    expect(read.records.map((r) => (r.type === 'session.revert' ? r.before : r.type))).toEqual(['x', 'y']);
    await expectNoLeaks(dir);
  });
});
