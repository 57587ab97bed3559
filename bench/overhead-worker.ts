/** Baseline of bench/overhead.ts: a bare piscina no-op task. */
export default function noop(i: number): number {
  return i;
}
