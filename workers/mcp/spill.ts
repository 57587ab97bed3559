/**
 * MCP messages too large to hold, on the host thread. A JSON-RPC message is
 * one line; past {@link SPILL_BYTES} the transport writes the rest of the
 * line to a file in the store's tmp/ (unlinked as soon as it is created, so
 * nothing is left on disk even by a crash) instead of memory. The line is
 * then parsed from the file into a skeleton (skeleton.ts): the message as
 * the SDK expects it, except that each large string of a tool result is a
 * short sentinel string standing for a span of the file, and the result's
 * `structuredContent` a sentinel object standing for its raw JSON. The call
 * worker reads those spans straight into the call's output (spill-read.ts)
 * through a descriptor of its own on the host's file, so a 1 GiB result is
 * never a string in any thread.
 *
 * Lifetime, without timers: a spill belongs to the engine call whose
 * request it answers (the transport knows the request's owner and hands
 * the spill over before delivering the message; host.ts) and is closed when
 * the engine says that call has ended, however it ended; one that answers
 * no live call's request is closed as it arrives; all are closed when the
 * host shuts down.
 */
import { randomBytes } from 'node:crypto';
import { type FileHandle, open, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { ClosedError, ProtocolError } from '../../engine/protocol/errors.js';
import type { McpSpillRef } from '../../engine/protocol/mcp.js';
import { parseSkeleton, type SpillSpan } from './skeleton.js';

/** Bytes of a line held in memory before the rest goes to a file. */
export const SPILL_BYTES = 1024 * 1024;
/** Bytes written to a spill file but not yet on disk before the transport stops reading its server. */
export const SPILL_QUEUE_BYTES = 8 * 1024 * 1024;

/** The key of the object that stands for a spilled `structuredContent`. */
export const RAW_KEY = '\u0000sluice-spill';

/** What a sentinel stands for: a span of escaped string bytes, or of raw JSON. */
interface SpanEntry extends SpillSpan {
  raw: boolean;
}

/** One open spill file. */
interface Spill {
  file: FileHandle;
  /** The file's identity, which a reader checks its own descriptor against (spill-read.ts). */
  dev: string;
  ino: string;
  path: string;
  spans: Map<string, SpanEntry>;
  /** Sentinels already claimed: each stands for one part of one result, claimed once. */
  claimed: Set<string>;
}

/** Open spill files by token (their sentinels carry the token). */
const spills = new Map<string, Spill>();
/** Set by {@link releaseAllSpills}: a spill finished after it is closed, not registered (nothing would close it). */
let shutDown = false;

/**
 * A sentinel is valid base64 (letters and digits, its length a multiple of
 * 4), because the SDK checks an image's `data` is; the random token makes it
 * unlike any text a server sends, and only registered sentinels count.
 */
const SENTINEL = /^SLUICESPILL([0-9a-f]{24})N(\d+)A*$/;

/** Closes spill `token`'s file; a token already closed (or unknown) is fine. */
export async function releaseSpill(token: string): Promise<void> {
  const s = spills.get(token);
  if (!s) return;
  spills.delete(token);
  await s.file.close();
}

/** Closes every spill file, and any finished from now on (the host thread is shutting down). */
export async function releaseAllSpills(): Promise<void> {
  shutDown = true;
  await Promise.all([...spills.keys()].map(releaseSpill));
}

/** The sentinel string `value` may be: itself, or the one of a structured-content stand-in. */
function sentinelOf(value: unknown): unknown {
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object' && RAW_KEY in value)
    return (value as Record<string, unknown>)[RAW_KEY];
  return undefined;
}

/** Whether `value` is a sentinel of an open spill (its claim not taken). */
export function isSpilled(value: unknown): boolean {
  const text = sentinelOf(value);
  if (typeof text !== 'string') return false;
  const m = SENTINEL.exec(text);
  return m !== null && spills.get(m[1] as string)?.spans.has(text) === true;
}

/** Tokens of the spill files open now (for tests and diagnostics). */
export function openSpillTokens(): string[] {
  return [...spills.keys()];
}

/**
 * The spill file and span a sentinel stands for (a string sentinel, or the
 * object that stands for structured content), or undefined for any other
 * value. A sentinel claimed twice is EPROTOCOL: each stands for one part of
 * one result, and two owners of it would read (and release) it twice.
 */
export function claimSpan(
  value: unknown,
): { ref: Pick<McpSpillRef, 'token' | 'fd' | 'dev' | 'ino' | 'path'>; span: SpillSpan; raw: boolean } | undefined {
  const text = sentinelOf(value);
  if (typeof text !== 'string') return undefined;
  const m = SENTINEL.exec(text);
  const s = m ? spills.get(m[1] as string) : undefined;
  const span = s?.spans.get(text);
  if (!m || !s || !span) return undefined;
  if (s.claimed.has(text)) throw new ProtocolError('a spilled MCP span was claimed twice', { token: m[1] });
  s.claimed.add(text);
  return {
    ref: { token: m[1] as string, fd: s.file.fd, dev: s.dev, ino: s.ino, path: s.path },
    span: { start: span.start, end: span.end },
    raw: span.raw,
  };
}

/** The message of a spilled line, and the token of its spill file when it has one. */
export interface SpilledMessage {
  value: unknown;
  token: string | undefined;
}

/**
 * Writes the tail of one oversized line to an unlinked file in `dir`, then
 * parses it into a skeleton. Writes are asynchronous: {@link queuedBytes}
 * says how much is not yet written, so the reader can stop reading its pipe.
 */
export class SpillWriter {
  private readonly file: Promise<FileHandle>;
  private readonly path: string;
  private chain: Promise<unknown>;
  private size = 0;
  private queued = 0;
  private failure: unknown;
  private readonly waiters = new Set<() => void>();

  constructor(dir: string) {
    const path = join(dir, `${process.pid}-${randomBytes(8).toString('hex')}.mcp-spill`);
    this.path = path;
    this.file = open(path, 'wx+', 0o600).then(async (fh) => {
      await unlink(path).catch(async (err: unknown) => {
        await fh.close();
        throw err;
      });
      return fh;
    });
    this.chain = this.file.catch((err: unknown) => {
      this.failure = err;
    });
  }

  /** Bytes handed to {@link write} and not yet written. */
  get queuedBytes(): number {
    return this.queued;
  }

  /** Resolves once fewer than {@link SPILL_QUEUE_BYTES} are queued. */
  drained(): Promise<void> {
    if (this.queued < SPILL_QUEUE_BYTES || this.failure !== undefined) return Promise.resolve();
    return new Promise((resolve) => this.waiters.add(resolve));
  }

  /** Appends bytes of the line (they are written in order, later). */
  write(piece: Buffer): void {
    const at = this.size;
    this.size += piece.length;
    this.queued += piece.length;
    this.chain = this.chain.then(async () => {
      try {
        if (this.failure === undefined) {
          const fh = await this.file;
          for (let off = 0; off < piece.length; ) {
            off += (await fh.write(piece, off, piece.length - off, at + off)).bytesWritten;
          }
        }
      } catch (err) {
        this.failure ??= err;
      } finally {
        this.queued -= piece.length;
        if (this.queued < SPILL_QUEUE_BYTES || this.failure !== undefined) {
          for (const w of this.waiters) w();
          this.waiters.clear();
        }
      }
    });
  }

  /** The line is whole: the message, with the large parts of a tool result as sentinels of spans of the file. */
  async end(): Promise<SpilledMessage> {
    await this.chain;
    const fh = await this.file.catch(() => undefined);
    if (this.failure !== undefined || !fh) {
      await fh?.close();
      throw this.failure;
    }
    const token = randomBytes(12).toString('hex');
    const spans = new Map<string, SpanEntry>();
    const sentinel = (span: SpillSpan, raw: boolean): string => {
      const bare = `SLUICESPILL${token}N${spans.size}`;
      const s = bare.padEnd(Math.ceil(bare.length / 4) * 4, 'A');
      spans.set(s, { ...span, raw });
      return s;
    };
    let value: unknown;
    try {
      value = await parseSkeleton(
        async (buf, length, position) => (await fh.read(buf, 0, length, position)).bytesRead,
        this.size,
        { span: (s) => sentinel(s, false), raw: (s) => ({ [RAW_KEY]: sentinel(s, true) }) },
      );
    } catch (err) {
      await fh.close();
      throw err;
    }
    if (spans.size === 0) {
      await fh.close();
      return { value, token: undefined };
    }
    let id: { dev: bigint; ino: bigint };
    try {
      id = await fh.stat({ bigint: true });
      // Shut down meanwhile: registered now, nothing would ever close it.
      if (shutDown) throw new ClosedError('the MCP host is shutting down');
    } catch (err) {
      await fh.close();
      throw err;
    }
    spills.set(token, {
      file: fh,
      dev: String(id.dev),
      ino: String(id.ino),
      path: this.path,
      spans,
      claimed: new Set(),
    });
    return { value, token };
  }

  /** The line was refused: the file goes. */
  async discard(): Promise<void> {
    await this.chain;
    await (await this.file.catch(() => undefined))?.close();
  }
}
