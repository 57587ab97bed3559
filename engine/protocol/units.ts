/** The one way sluice writes a size for people; dependency-free, so a worker's start path may load it. */

const UNITS = ['KiB', 'MiB', 'GiB', 'TiB'] as const;

/** Binary units with one decimal, rounded down, so a size never shows as the next unit's worth (1048575 bytes is `1023.9 KiB`). */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return `${(Math.floor(v * 10) / 10).toFixed(1)} ${UNITS[u]}`;
}
