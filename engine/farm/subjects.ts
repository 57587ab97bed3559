/**
 * Where a farm queue keeps things on its server. Queue NAME owns two
 * streams: `sluice_NAME_work`, a work queue of calls (one message per item,
 * removed when acknowledged), and `sluice_NAME_results`, the recorded
 * results and withdrawal marks (kept for the retention period). Each item
 * has its own subjects, so a result can be fenced per item (publish only if
 * the subject has no message yet) and a batch's results read by a wildcard. Batch and item ids are arbitrary text, so each is a token in
 * base64url (no `.`, `*`, `>` or space, which subjects reserve).
 */
import { BadArgumentsError } from '../protocol/errors.js';

/** Longest batch or item id, in UTF-8 bytes: a subject carries both, and NATS bounds a control line to 4 KiB. */
export const MAX_ID_BYTES = 256;

/** The names of queue `name`'s streams, consumer and subjects. */
export interface QueueNames {
  readonly workStream: string;
  readonly resultStream: string;
  /** The durable pull consumer every worker takes from. */
  readonly consumer: string;
  /** Every work subject (the consumer's filter). */
  readonly allWork: string;
  /** Every subject of the result stream. */
  readonly allResults: readonly string[];
  /** Every withdrawal mark (a worker's watch). */
  readonly allWithdrawn: string;
  work(batchId: string, itemId: string): string;
  result(batchId: string, itemId: string): string;
  /** A batch's result subjects (for reading them back). */
  batchResults(batchId: string): string;
  withdrawn(batchId: string): string;
  /** The batch and item of a work or result subject. */
  parse(subject: string): { batchId: string; itemId: string };
}

/** The subject token of an id, refusing an empty or oversized one (EBADARGS). */
export function idToken(what: 'batch' | 'item', id: string): string {
  if (typeof id !== 'string' || id === '') throw new BadArgumentsError(`a ${what} id must be a non-empty string`);
  const bytes = Buffer.from(id, 'utf8');
  if (bytes.length > MAX_ID_BYTES) {
    throw new BadArgumentsError(`${what} id of ${bytes.length} bytes is over the bound of ${MAX_ID_BYTES}`, {
      [`${what}Id`]: id.slice(0, 64),
    });
  }
  return bytes.toString('base64url');
}

const fromToken = (token: string): string => Buffer.from(token, 'base64url').toString('utf8');

/** The names of queue `name` (already checked by parseQueueUrl). */
export function queueNames(name: string): QueueNames {
  const root = `sluice.${name}`;
  return {
    workStream: `sluice_${name}_work`,
    resultStream: `sluice_${name}_results`,
    consumer: `sluice_${name}_workers`,
    allWork: `${root}.work.>`,
    allResults: [`${root}.result.>`, `${root}.withdrawn.>`],
    allWithdrawn: `${root}.withdrawn.>`,
    work: (b, i) => `${root}.work.${idToken('batch', b)}.${idToken('item', i)}`,
    result: (b, i) => `${root}.result.${idToken('batch', b)}.${idToken('item', i)}`,
    batchResults: (b) => `${root}.result.${idToken('batch', b)}.*`,
    withdrawn: (b) => `${root}.withdrawn.${idToken('batch', b)}`,
    parse: (subject) => {
      const parts = subject.split('.');
      return { batchId: fromToken(parts[3] ?? ''), itemId: fromToken(parts[4] ?? '') };
    },
  };
}
