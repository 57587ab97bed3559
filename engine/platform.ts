/**
 * The platforms sluice runs on, checked when an engine opens: it needs
 * Linux for POSIX process groups killed as a whole, bash, and /proc, which
 * the owner checks and the orphan reaper read to tell a dead process from a
 * live one (README.md, "Requirements").
 */
import { UnsupportedPlatformError } from './protocol/errors.js';

/** The operating systems sluice supports (`process.platform` values). */
export const SUPPORTED_PLATFORMS: readonly NodeJS.Platform[] = ['linux'];

/** Why sluice cannot run on `platform`, or undefined when it can. */
export function platformProblem(platform: NodeJS.Platform): string | undefined {
  if (SUPPORTED_PLATFORMS.includes(platform)) return undefined;
  return `sluice runs on Linux only (it needs POSIX process groups, bash, and /proc for its owner checks); this is ${JSON.stringify(platform)}`;
}

/** Throws {@link UnsupportedPlatformError} (EUNSUPPORTED) unless `platform` is supported. */
export function assertSupportedPlatform(platform: NodeJS.Platform = process.platform): void {
  const problem = platformProblem(platform);
  if (problem !== undefined) throw new UnsupportedPlatformError(problem, { platform });
}
