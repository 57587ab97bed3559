/** Gates for sandbox tests that need what a machine or user may lack: a skipped one says why. */

/** `condition`, printing `<what> did not run: <why>` when it is false (for `it.runIf` / `describe.runIf`). */
export function runsIf(condition: boolean, what: string, why: string): boolean {
  if (!condition) console.info(`${what} did not run: ${why}`);
  return condition;
}
