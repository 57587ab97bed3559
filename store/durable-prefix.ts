/**
 * The durable prefix of a cut capture: after a failed
 * write the capture file holds exactly the bytes each system call reported,
 * so that prefix is cut to length, made durable and read back for its
 * digest and lines (docs/store.md, "A full disk").
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import type { StoreFile } from './file.js';
import type { StoreIO } from './io.js';
import { LineScanner } from './line-index.js';

const READ_BACK_BYTES = 1024 * 1024;

/** Digest and line count of a durable prefix. */
export interface DurablePrefix {
  digest: string;
  lines: number;
}

/**
 * Cuts the capture file at `path` (open as `file`) to `bytes`, fsyncs it when
 * `durable` (a store that places the file itself; S3 uploads it instead),
 * and reads it back; each piece read also goes to `sink`, so a caller can
 * rebuild what it derived from the lost bytes.
 */
export async function commitDurablePrefix(
  io: StoreIO,
  file: StoreFile,
  path: string,
  bytes: number,
  durable: boolean,
  sink: (chunk: Uint8Array) => void,
): Promise<DurablePrefix> {
  await io.truncate(file, bytes);
  if (durable) await io.fsync(file);
  const hash = createHash('sha256');
  const scanner = new LineScanner();
  const fh = await io.open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    let at = 0;
    while (at < bytes) {
      const buf = Buffer.allocUnsafe(Math.min(READ_BACK_BYTES, bytes - at));
      const { bytesRead } = await fh.read(buf, 0, buf.length, at);
      if (bytesRead === 0) throw Object.assign(new Error('capture file shorter than written'), { code: 'EIO' });
      const piece = buf.subarray(0, bytesRead);
      hash.update(piece);
      scanner.push(piece);
      sink(piece);
      at += bytesRead;
    }
  } finally {
    await fh.close();
  }
  return { digest: hash.digest('hex'), lines: scanner.lines };
}
