/**
 * The one way sluice writes a size for people: in displays (the bash tool's
 * status line, the read tool's, an incomplete call's), the CLI's reports and
 * error messages. Light and dependency-free, so a worker's start path may
 * load it (test/protocol/worker-imports.test.ts).
 */

const UNITS = ['KiB', 'MiB', 'GiB', 'TiB'] as const;

/**
 * `0 B`, `1 B`, `1023 B`, `1.0 KiB`, `1.5 KiB`, `100.0 MiB`, `2.0 GiB`:
 * binary units with one decimal, rounded down, so a size is never shown as
 * the next unit's worth (1048575 bytes is `1023.9 KiB`, not `1024.0 KiB`).
 */
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
