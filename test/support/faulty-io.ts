/**
 * A fault-injecting, recording {@link StoreIO} for tests: wraps another
 * StoreIO (the real filesystem by default) and
 *
 * - records every operation in order, with the file it touched and that
 *   file's role in the store (capture in tmp/, blob, pin, session log, ...);
 * - fails the n-th operation matching a rule (by kind, role, or any
 *   predicate) with ENOSPC, EIO, EACCES, ... as Node raises them, or turns a
 *   write into a short write;
 * - simulates a crash: from the matching operation on, every operation fails,
 *   so nothing a dead process could not have done reaches the disk (its
 *   cleanup included: temporary files and pins stay behind, as after SIGKILL).
 *
 * Pass it as `Store.open(dir, { io })` or `Engine.open({ io })`.
 */

import { relative, sep } from 'node:path';
import type { StoreFile } from '../../store/file.js';
import { realIO, type StoreIO } from '../../store/io.js';

/** The operations of {@link StoreIO}. */
export type IoOp = keyof StoreIO;

/** What a path is to the store. */
export type Role =
  | 'capture' // tmp/<pid>-<rand>.blob
  | 'index-tmp' // tmp/<pid>-<rand>.idx
  | 'blob' // blobs/sha256/xx/...
  | 'blob-dir' // blobs/sha256/xx
  | 'index' // index/sha256/xx/....idx
  | 'index-dir'
  | 'pin' // pins/<pid>-<rand>.pin
  | 'log' // sessions/<id>/events.log
  | 'session-dir' // sessions/<id>
  | 'sessions-dir' // sessions
  | 'trash' // gc/trash/...
  | 'pack' // packs/<pid>-<rand>.pack
  | 'pack-index' // packs/<pid>-<rand>.idx
  | 'packs-dir' // packs
  | 'reserve' // reserve (store/space-reserve.ts)
  | 'other';

/** One recorded operation. */
export interface OpRecord {
  /** Position in the whole sequence, from 0. */
  seq: number;
  op: IoOp;
  /** The file or directory operated on (for rename: the source). */
  path: string;
  role: Role;
  /** Rename target. */
  to?: string;
  toRole?: Role;
  /** Bytes asked to write (write, writev). */
  bytes?: number;
  /** The bytes of a small write (at most 1 KiB), as latin1: what a pin or log line said. */
  text?: string;
  /** True when this operation was failed by a fault. */
  failed?: boolean;
}

/** A rule choosing operations to fail. */
export interface FaultRule {
  /** Operation kinds it applies to (default: all). */
  op?: IoOp | readonly IoOp[];
  /** Roles it applies to (for rename, the role of either end). */
  role?: Role | readonly Role[];
  /** Any further condition. */
  when?: (rec: OpRecord) => boolean;
  /** Fail the n-th matching operation (1-based). @default 1 */
  nth?: number;
  /** How many matching operations fail from the n-th on. @default 1 */
  times?: number;
  /** The errno to fail with, or `short` for a write that writes only part of its bytes. */
  errno: string;
}

/** A rule in force: how often it fired. */
export interface Fault {
  readonly rule: FaultRule;
  /** Matching operations seen. */
  readonly seen: number;
  /** Operations failed (or shortened). */
  readonly fired: number;
}

const SYSCALL: Record<IoOp, string> = {
  open: 'open',
  write: 'write',
  writev: 'writev',
  truncate: 'ftruncate',
  fsync: 'fsync',
  datasync: 'fdatasync',
  fsyncDir: 'fsync',
  rename: 'rename',
  unlink: 'unlink',
  utimes: 'utime',
  mkdir: 'mkdir',
  readdir: 'scandir',
  stat: 'stat',
  lstat: 'lstat',
  rmdir: 'rmdir',
  link: 'link',
};

const ERRNO: Record<string, number> = { ENOSPC: -28, EIO: -5, EACCES: -13, EROFS: -30, EDQUOT: -122, EPERM: -1 };

/** An fs error as Node raises it. */
export function injectedError(errno: string, op: IoOp, path: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${errno}: injected fault, ${SYSCALL[op]} '${path}'`), {
    code: errno,
    errno: ERRNO[errno] ?? -1,
    syscall: SYSCALL[op],
    path,
  });
}

/** The role of `path` in the store rooted at `root`. */
export function roleOf(root: string, path: string): Role {
  const rel = relative(root, path).split(sep);
  const [top, second, third] = rel;
  if (rel[0] === '..' || rel.length === 0) return 'other';
  switch (top) {
    case 'reserve':
      return rel.length === 1 ? 'reserve' : 'other';
    case 'tmp':
      if (second?.endsWith('.idx')) return 'index-tmp';
      return second === undefined ? 'other' : 'capture';
    case 'blobs':
      return rel.length === 4 ? 'blob' : rel.length === 3 ? 'blob-dir' : 'other';
    case 'index':
      return rel.length === 4 ? 'index' : rel.length === 3 ? 'index-dir' : 'other';
    case 'pins':
      return second === undefined ? 'other' : 'pin';
    case 'sessions':
      if (second === undefined) return 'sessions-dir';
      if (third === undefined) return 'session-dir';
      return third === 'events.log' ? 'log' : 'other';
    case 'gc':
      return second === 'trash' ? 'trash' : 'other';
    case 'packs':
      if (second === undefined) return 'packs-dir';
      return second.endsWith('.idx') ? 'pack-index' : 'pack';
    default:
      return 'other';
  }
}

class ActiveFault implements Fault {
  readonly rule: FaultRule;
  seen = 0;
  fired = 0;
  constructor(rule: FaultRule) {
    this.rule = rule;
  }
  matches(rec: OpRecord): boolean {
    const { op, role, when } = this.rule;
    if (op !== undefined && !(typeof op === 'string' ? op === rec.op : op.includes(rec.op))) return false;
    if (role !== undefined) {
      const roles: readonly Role[] = typeof role === 'string' ? [role] : role;
      if (!roles.includes(rec.role) && !(rec.toRole !== undefined && roles.includes(rec.toRole))) return false;
    }
    return when === undefined || when(rec);
  }
  /** Counts a matching operation; true when this one must fail. */
  take(): boolean {
    this.seen++;
    const nth = this.rule.nth ?? 1;
    const times = this.rule.times ?? 1;
    if (this.seen >= nth && this.seen < nth + times) {
      this.fired++;
      return true;
    }
    return false;
  }
}

/** See the module comment. */
export class FaultyIO implements StoreIO {
  /** Every operation so far, in order (see {@link clearLog}). */
  readonly log: OpRecord[] = [];
  private readonly root: string;
  private readonly base: StoreIO;
  private readonly paths = new WeakMap<StoreFile, string>();
  private readonly handles = new Set<StoreFile>();
  private faults: ActiveFault[] = [];
  private crashRule: ActiveFault | undefined;
  private dead = false;
  private seq = 0;

  /** I/O for the store at `root` (needed to tell roles), over `base`. */
  constructor(root: string, base: StoreIO = realIO) {
    this.root = root;
    this.base = base;
  }

  /** Fails operations matching `rule` (see {@link FaultRule}); returns its counters. */
  inject(rule: FaultRule): Fault {
    const f = new ActiveFault(rule);
    this.faults.push(f);
    return f;
  }

  /**
   * From the first operation matching `rule` (its n-th, with `nth`) on, every
   * operation fails with EIO, as if the process had died there: the matching
   * operation does not happen, nor does any cleanup after it.
   */
  crashAt(rule: Omit<FaultRule, 'errno' | 'times'>): Fault {
    const f = new ActiveFault({ ...rule, errno: 'EIO' });
    this.crashRule = f;
    return f;
  }

  /** From now on every operation fails, as after a crash rule fired (the process is dead). */
  kill(): void {
    this.dead = true;
  }

  /** True once a crash rule has fired. */
  get crashed(): boolean {
    return this.dead;
  }

  /** Removes every fault and crash rule (recording goes on). */
  reset(): void {
    this.faults = [];
    this.crashRule = undefined;
    this.dead = false;
  }

  /** Empties the operation log. */
  clearLog(): void {
    this.log.length = 0;
  }

  /** Paths of handles opened through this I/O and not closed yet: a leak check. */
  openHandles(): string[] {
    const out: string[] = [];
    for (const fh of this.handles) {
      if (fh.fd === -1) this.handles.delete(fh);
      else out.push(this.pathOf(fh));
    }
    return out;
  }

  /** Path a handle was opened with. */
  pathOf(fh: StoreFile): string {
    return this.paths.get(fh) ?? '?';
  }

  private record(op: IoOp, path: string, extra: Partial<OpRecord> = {}): OpRecord {
    const rec: OpRecord = { seq: this.seq++, op, path, role: roleOf(this.root, path), ...extra };
    if (extra.to !== undefined) rec.toRole = roleOf(this.root, extra.to);
    this.log.push(rec);
    return rec;
  }

  /** Decides the fate of `rec`: undefined to proceed, `short` to shorten a write, or the error to fail with. */
  private decide(rec: OpRecord): NodeJS.ErrnoException | 'short' | undefined {
    if (this.dead) {
      rec.failed = true;
      return injectedError('EIO', rec.op, rec.path);
    }
    if (this.crashRule?.matches(rec) && this.crashRule.take()) {
      this.dead = true;
      rec.failed = true;
      return injectedError('EIO', rec.op, rec.path);
    }
    let outcome: NodeJS.ErrnoException | 'short' | undefined;
    for (const f of this.faults) {
      if (!f.matches(rec) || !f.take() || outcome !== undefined) continue;
      rec.failed = true;
      outcome = f.rule.errno === 'short' ? 'short' : injectedError(f.rule.errno, rec.op, rec.path);
    }
    return outcome;
  }

  private async run<T>(rec: OpRecord, real: () => Promise<T>): Promise<T> {
    const fate = this.decide(rec);
    if (fate !== undefined && fate !== 'short') throw fate;
    return real();
  }

  open = async (path: string, flags: number, mode?: number): Promise<StoreFile> => {
    const rec = this.record('open', path);
    const fh = await this.run(rec, () => this.base.open(path, flags, mode));
    this.paths.set(fh, path);
    this.handles.add(fh);
    return fh;
  };

  write = async (fh: StoreFile, buf: Uint8Array, off: number, len: number, position: number | null) => {
    const rec = this.record('write', this.pathOf(fh), {
      bytes: len,
      ...(len <= 1024 ? { text: Buffer.from(buf.buffer, buf.byteOffset + off, len).toString('latin1') } : {}),
    });
    const fate = this.decide(rec);
    if (fate === 'short') return this.base.write(fh, buf, off, Math.max(1, len >> 1), position);
    if (fate !== undefined) throw fate;
    return this.base.write(fh, buf, off, len, position);
  };

  writev = async (fh: StoreFile, bufs: Uint8Array[], position: number) => {
    const bytes = bufs.reduce((n, b) => n + b.length, 0);
    const rec = this.record('writev', this.pathOf(fh), { bytes });
    const fate = this.decide(rec);
    // A short writev: the first buffer only (or half of it), as a kernel may do.
    if (fate === 'short') {
      const first = bufs[0] as Uint8Array;
      return this.base.write(fh, first, 0, Math.max(1, first.length >> 1), position);
    }
    if (fate !== undefined) throw fate;
    return this.base.writev(fh, bufs, position);
  };

  truncate = (fh: StoreFile, length: number) =>
    this.run(this.record('truncate', this.pathOf(fh)), () => this.base.truncate(fh, length));
  fsync = (fh: StoreFile) => this.run(this.record('fsync', this.pathOf(fh)), () => this.base.fsync(fh));
  datasync = (fh: StoreFile) => this.run(this.record('datasync', this.pathOf(fh)), () => this.base.datasync(fh));
  fsyncDir = (dir: string) => this.run(this.record('fsyncDir', dir), () => this.base.fsyncDir(dir));
  rename = (from: string, to: string) =>
    this.run(this.record('rename', from, { to }), () => this.base.rename(from, to));
  unlink = (path: string) => this.run(this.record('unlink', path), () => this.base.unlink(path));
  utimes = (path: string, atime: Date, mtime: Date) =>
    this.run(this.record('utimes', path), () => this.base.utimes(path, atime, mtime));
  mkdir = (path: string) => this.run(this.record('mkdir', path), () => this.base.mkdir(path));
  readdir = (dir: string) => this.run(this.record('readdir', dir), () => this.base.readdir(dir));
  stat = (path: string) => this.run(this.record('stat', path), () => this.base.stat(path));
  lstat = (path: string) => this.run(this.record('lstat', path), () => this.base.lstat(path));
  rmdir = (path: string) => this.run(this.record('rmdir', path), () => this.base.rmdir(path));
  link = (existing: string, newPath: string) =>
    this.run(this.record('link', existing, { to: newPath }), () => this.base.link(existing, newPath));
}

/** Operations that only look (open for reading, listings, stat). */
const LOOKS: ReadonlySet<IoOp> = new Set<IoOp>(['open', 'readdir', 'stat', 'lstat']);

/** Operations that change what is on disk or make it durable (everything except opening and looking). */
export function isDurableOp(rec: OpRecord): boolean {
  return !LOOKS.has(rec.op);
}

/** A short label for an operation, for test names and failure messages: `fsync capture`, `rename capture→blob`. */
export function label(rec: Pick<OpRecord, 'op' | 'role' | 'toRole'>): string {
  return rec.toRole !== undefined ? `${rec.op} ${rec.role}→${rec.toRole}` : `${rec.op} ${rec.role}`;
}
