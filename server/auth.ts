/**
 * The server's bearer token: 32 random bytes as 64 hex digits, created on
 * first start in `<store>/server.token` with mode 0600 and reused afterwards.
 *
 * Creation is atomic: the token is written and fsynced under a temporary
 * name, then hard-linked into place, which fails if another server created
 * the file first (that one's token is then used), so a reader never sees a
 * partly written token. A token file that others can read, that is not a
 * regular file, or that does not hold a token is refused rather than trusted
 * or silently replaced.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { BadOptionError, toSluiceError } from '../engine/protocol/errors.js';

/** Name of the token file inside the store directory. */
export const TOKEN_FILE = 'server.token';

const TOKEN = /^[0-9a-f]{64}$/;

/** The server token and where it lives. */
export interface ServerToken {
  token: string;
  /** Absolute path of the token file. */
  path: string;
  /** True when this call created it (the only time it should be shown). */
  created: boolean;
}

/** Reads the token of the store at `storeDir`, creating it on first use. */
export async function loadOrCreateToken(storeDir: string): Promise<ServerToken> {
  const path = join(storeDir, TOKEN_FILE);
  const existing = await readToken(path);
  if (existing !== undefined) return { token: existing, path, created: false };
  const token = randomBytes(32).toString('hex');
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    const fh = await fsp.open(tmp, 'wx', 0o600);
    try {
      // The mode given to open() is masked by the umask; make sure of 0600 whatever the umask.
      await fh.chmod(0o600);
      await fh.writeFile(`${token}\n`);
      await fh.sync();
    } finally {
      await fh.close();
    }
    try {
      await fsp.link(tmp, path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // Another server created it first: use theirs.
      const theirs = await readToken(path);
      if (theirs === undefined) throw err;
      return { token: theirs, path, created: false };
    }
    return { token, path, created: true };
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  } finally {
    await fsp.rm(tmp, { force: true });
  }
}

/** The token in `path`, undefined when there is no such file; refuses unsafe or malformed files. */
async function readToken(path: string): Promise<string | undefined> {
  let st: Awaited<ReturnType<typeof fsp.lstat>>;
  try {
    st = await fsp.lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw toSluiceError(err, 'EDISK');
  }
  if (!st.isFile()) throw new BadOptionError(`${path} is not a regular file; remove it to create a new token`);
  if ((st.mode & 0o077) !== 0) {
    throw new BadOptionError(
      `${path} is readable or writable by others (mode ${(st.mode & 0o777).toString(8)}); the token may have leaked: remove the file to create a new one`,
    );
  }
  const text = (await fsp.readFile(path, 'utf8').catch((err) => Promise.reject(toSluiceError(err, 'EDISK')))).trim();
  if (!TOKEN.test(text)) throw new BadOptionError(`${path} does not hold a token; remove it to create a new one`);
  return text;
}

/**
 * True when an `Authorization` header carries `token` as a bearer token. The
 * comparison takes the same time whatever the header holds: both sides are
 * hashed to fixed-length digests first, then compared with timingSafeEqual.
 */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer +(\S+) *$/i.exec(header ?? '');
  const given = createHash('sha256')
    .update(m?.[1] ?? '')
    .digest();
  const expected = createHash('sha256').update(token).digest();
  return timingSafeEqual(given, expected) && m !== null;
}
