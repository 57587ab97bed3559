/**
 * The spawn helper's own environment: without Node's variables, which it
 * needs none of (`NODE_EXTRA_CA_CERTS` slows every start,
 * docs/benchmarks.md; `NODE_OPTIONS` can preload modules). Its processes get
 * the worker's environment whole, sent over the channel: through `/bin/sh`
 * a shell passes on only the names it can hold (dash drops `a-b` and
 * `BASH_FUNC_name%%`). Imports nothing.
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
