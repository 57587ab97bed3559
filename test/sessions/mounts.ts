/**
 * Filesystems for tests, mounted by the test (only root can; elsewhere these
 * say why they could not, and the test skips with that reason):
 *
 * - {@link mountCoarseFs}: 1-second timestamps, ext4 with 128-byte inodes
 *   (`mkfs.ext4 -I 128` has no room for nanoseconds), in a sparse image
 *   file, loop-mounted;
 * - {@link bindReadOnly}: a read-only view of a directory (a bind mount).
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A filesystem a test mounted; `unmount` removes it (and its image, if it has one). */
export interface CoarseFs {
  /** The mount point: an empty directory on the filesystem. */
  dir: string;
  unmount(): Promise<void>;
}

/** Mounts a fresh one (`sizeMiB` big), or returns the reason it cannot. */
export async function mountCoarseFs(sizeMiB = 256): Promise<CoarseFs | { reason: string }> {
  if (process.platform !== 'linux') return { reason: `loop mounts need Linux, this is ${process.platform}` };
  if (process.getuid?.() !== 0) return { reason: 'mounting a loop device needs root' };
  const base = await fsp.mkdtemp(join(tmpdir(), 'sluice-coarse-'));
  const image = join(base, 'fs.img');
  const dir = join(base, 'mnt');
  let mounted = false;
  const remove = async () => {
    if (mounted) await run('umount', [dir]).catch(() => run('umount', ['-l', dir]));
    mounted = false;
    await fsp.rm(base, { recursive: true, force: true });
  };
  try {
    await fsp.mkdir(dir);
    await fsp.writeFile(image, '');
    await fsp.truncate(image, sizeMiB * 1024 * 1024);
    await run('mkfs.ext4', ['-q', '-F', '-I', '128', image]);
    await run('mount', ['-o', 'loop', image, dir]);
    mounted = true;
    // Make sure it is what the test needs: a fresh file's mtime has no sub-second part.
    const probe = join(dir, 'probe');
    await fsp.writeFile(probe, '');
    const { mtimeNs } = await fsp.stat(probe, { bigint: true });
    await fsp.rm(probe);
    if (mtimeNs % 1_000_000_000n !== 0n) {
      await remove();
      return { reason: 'ext4 -I 128 kept sub-second timestamps here' };
    }
    return { dir, unmount: remove };
  } catch (err) {
    await remove().catch(() => {});
    return { reason: `could not create the filesystem: ${(err as Error).message.split('\n')[0]}` };
  }
}

/** A read-only bind mount of `dir`; `unmount` removes it (`dir` itself stays). */
export async function bindReadOnly(dir: string): Promise<CoarseFs | { reason: string }> {
  if (process.platform !== 'linux') return { reason: `bind mounts need Linux, this is ${process.platform}` };
  if (process.getuid?.() !== 0) return { reason: 'a bind mount needs root' };
  const view = await fsp.mkdtemp(join(tmpdir(), 'sluice-ro-'));
  try {
    await run('mount', ['--bind', dir, view]);
    await run('mount', ['-o', 'remount,bind,ro', view]);
  } catch (err) {
    await run('umount', [view]).catch(() => {});
    await fsp.rm(view, { recursive: true, force: true });
    return { reason: `could not bind-mount read-only: ${(err as Error).message.split('\n')[0]}` };
  }
  return {
    dir: view,
    unmount: async () => {
      await run('umount', [view]).catch(() => run('umount', ['-l', view]));
      await fsp.rmdir(view);
    },
  };
}
