/**
 * A filesystem with 1-second timestamps for tests: ext4 with 128-byte inodes
 * (`mkfs.ext4 -I 128` has no room for nanoseconds), in a sparse image file,
 * loop-mounted. Only root can mount; elsewhere {@link mountCoarseFs} says why
 * it could not, and the test skips with that reason.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A mounted coarse-timestamp filesystem; `unmount` removes it and its image. */
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
