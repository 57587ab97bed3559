/**
 * terminalStatus() row by row against the table "Terminal status" in
 * docs/architecture.md (the disk-error row is the publication's, tested in
 * the disk-fault suites). The table itself is read from the document, so a
 * row changed there without a change here fails.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type Outcome, terminalStatus } from '../../engine/call/terminal-status.js';
import {
  BadOutputError,
  CancelledError,
  ProtocolError,
  ResourceLimitError,
  SizeLimitError,
  type SluiceError,
  serializeError,
  TimeoutError,
} from '../../engine/protocol/errors.js';

const done = (completion: Record<string, unknown> = {}): Outcome =>
  ({ kind: 'done', completion: { mode: 'streamed', ...completion } }) as Outcome;
const threw = (err: SluiceError, cancelled = false): Outcome => ({
  kind: 'fail',
  error: serializeError(err),
  cancelled,
});

interface Row {
  /** The start of the table row's first cell. */
  row: string;
  cases: Array<{ outcome: Outcome; failure?: SluiceError; cancel?: SluiceError }>;
  status: 'success' | 'failed' | 'cancelled';
  code?: string;
  complete: boolean;
}

const ROWS: Row[] = [
  { row: 'tool returned, no failure', cases: [{ outcome: done() }], status: 'success', complete: true },
  {
    row: "tool returned `status: 'failed'`",
    cases: [{ outcome: done({ status: 'failed', note: 'exit code 3' }) }],
    status: 'failed',
    complete: true,
  },
  {
    row: 'tool threw, undeclared stream, mixed modes, bad full output',
    cases: [
      { outcome: threw(new BadOutputError('results must be a string')) },
      { outcome: done(), failure: new BadOutputError('undeclared') },
    ],
    status: 'failed',
    complete: false,
  },
  {
    row: 'a completion past its bounds',
    cases: [{ outcome: done(), failure: new ResourceLimitError('queue bound') }],
    status: 'failed',
    code: 'ERESOURCELIMIT',
    complete: false,
  },
  {
    row: 'worker crashed',
    cases: [{ outcome: { kind: 'crash', error: Object.assign(new Error('exit 1'), { code: 'ERR_WORKER_EXIT' }) } }],
    status: 'failed',
    code: 'EWORKERCRASH',
    complete: false,
  },
  {
    row: 'stream passed `maxStreamBytes`',
    cases: [
      { outcome: threw(new CancelledError('stopped'), true), failure: new SizeLimitError('over') },
      { outcome: done(), cancel: new SizeLimitError('over') },
    ],
    status: 'failed',
    code: 'ESIZELIMIT',
    complete: false,
  },
  {
    row: '`timeoutMs` call option',
    cases: [
      { outcome: threw(new CancelledError('stopped'), true), failure: new TimeoutError('ran longer') },
      { outcome: { kind: 'crash', error: new Error('terminated') }, failure: new TimeoutError('ran longer') },
      { outcome: done({ error: serializeError(new TimeoutError('bash timeout')) }) },
    ],
    status: 'failed',
    code: 'ETIMEOUT',
    complete: false,
  },
  {
    row: 'cancelled (cooperative, or worker terminated after `graceMs`)',
    cases: [
      { outcome: threw(new CancelledError('cancelled'), true) },
      { outcome: done(), cancel: new CancelledError('cancelled by the caller') },
      { outcome: { kind: 'crash', error: new Error('terminated') }, cancel: new CancelledError('cancelled') },
    ],
    status: 'cancelled',
    code: 'ECANCELLED',
    complete: false,
  },
];

describe('terminalStatus follows the status table of docs/architecture.md', () => {
  const doc = readFileSync(new URL('../../docs/architecture.md', import.meta.url), 'utf8');
  const table = doc.slice(doc.indexOf('### Terminal status'), doc.indexOf('"Accepted part published"'));

  for (const r of ROWS) {
    it(`${r.row} → ${r.status}${r.code ? ` (${r.code})` : ''}, complete ${r.complete}`, () => {
      const line = table.split('\n').find((l) => l.startsWith(`| ${r.row}`));
      expect(line, `row "${r.row}" in the table`).toBeDefined();
      const [, , status, complete] = (line as string).split('|').map((c) => c.trim());
      expect(status).toContain(`\`${r.status}\``);
      if (r.code && status !== `\`${r.status}\``) expect(status).toContain(r.code);
      expect(complete).toBe(String(r.complete));
      for (const c of r.cases) {
        const got = terminalStatus({ outcome: c.outcome, failure: c.failure, cancelRequested: c.cancel, tool: 't' });
        expect(got.status).toBe(r.status);
        expect(got.complete).toBe(r.complete);
        if (r.code) expect(got.error?.code).toBe(r.code);
        if (r.status === 'success') expect(got.error).toBeUndefined();
      }
    });
  }

  it("a failure the engine imposed wins over the tool's own completion, which then does not stand", () => {
    const got = terminalStatus({
      outcome: done({ error: serializeError(new TimeoutError('tool timeout')) }),
      failure: new ProtocolError('bad declaration'),
      tool: 't',
    });
    expect([got.status, got.error?.code, got.toolsOwnError]).toEqual(['failed', 'EPROTOCOL', false]);
  });

  it("a tool's own typed failure is its own: its display and metadata stand", () => {
    const got = terminalStatus({
      outcome: done({ error: serializeError(new TimeoutError('bash timeout')) }),
      tool: 't',
    });
    expect([got.toolsOwnError, got.reportedError?.message]).toEqual([true, 'bash timeout']);
  });

  it('a crash names the tool and keeps the cause code', () => {
    const got = terminalStatus({
      outcome: { kind: 'crash', error: Object.assign(new Error('heap'), { code: 'ERR_WORKER_OUT_OF_MEMORY' }) },
      tool: 'bash',
    });
    expect(got.error?.message).toBe('the worker running bash died: heap');
    expect(got.error?.details).toEqual({ cause: 'ERR_WORKER_OUT_OF_MEMORY' });
  });
});
