/**
 * The spawn helper's own environment.
 *
 * The helper is a Node process (or a Python one), so the variables that
 * configure Node would apply to it, though it needs none of them.
 * `NODE_EXTRA_CA_CERTS` is read and parsed when a Node process starts: with
 * a distribution's bundle (~140 certificates) that took a bare Node's start
 * from ~20-25 ms to ~50-60 ms on this project's machine, on every helper
 * start. `NODE_OPTIONS` can preload modules (`--require`, `--import`). So the
 * helper starts without them.
 *
 * The processes it starts do not get this environment: the worker sends the
 * helper its own, whole, as the channel's first message (workers/spawner.ts),
 * because the helper is started through `/bin/sh`, and a shell passes on only
 * the variables whose names it can hold (dash drops `a-b` and the
 * `BASH_FUNC_name%%` of an exported bash function).
 *
 * This file imports nothing.
 */

/** The Node variables the helper itself runs without. */
const HELPER_WITHOUT = ['NODE_EXTRA_CA_CERTS', 'NODE_OPTIONS'] as const;

/** The environment to start the helper with: `env` without the {@link HELPER_WITHOUT} variables. */
export function helperEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (!(HELPER_WITHOUT as readonly string[]).includes(name)) out[name] = value;
  }
  return out;
}
