/**
 * The spawn helper's own environment, and the one it gives the processes it
 * starts.
 *
 * The helper is a Node process, so the variables that configure Node apply
 * to it too, though it needs none of them. `NODE_EXTRA_CA_CERTS` is read
 * and parsed when a Node process starts: with a distribution's bundle
 * (~140 certificates) that took a bare Node from ~20 ms to ~55 ms of CPU
 * on this project's machine, on every helper start. `NODE_OPTIONS` can
 * preload modules (`--require`, `--import`). The tools must still see them:
 * a Node tool started by bash trusts the same certificates whether the
 * helper started it or the engine did. So the helper starts without them,
 * and carries their values under {@link HELD_PREFIX} names, which it turns
 * back into the originals for everything it starts.
 *
 * This file imports nothing: the helper process and the worker threads
 * both use it.
 */

/** The Node variables the helper itself runs without. */
export const HELPER_WITHOUT = ['NODE_EXTRA_CA_CERTS', 'NODE_OPTIONS'] as const;

/** Where the helper's environment carries a held variable's value: `SLUICE_SPAWNER_HELD_<name>`. */
export const HELD_PREFIX = 'SLUICE_SPAWNER_HELD_';

/**
 * The environment to start the helper with: `env` without the
 * {@link HELPER_WITHOUT} variables, their values held under
 * {@link HELD_PREFIX} names. A held name already in `env` is dropped, so
 * the helper can never restore a value that was not one of these.
 */
export function helperEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env };
  for (const name of HELPER_WITHOUT) {
    delete out[HELD_PREFIX + name];
    const value = out[name];
    if (value === undefined) continue;
    delete out[name];
    out[HELD_PREFIX + name] = value;
  }
  return out;
}

/**
 * The environment the helper gives what it starts: its own with the held
 * variables restored to their names and the carriers removed, so a tool's
 * environment is the engine's, exactly.
 */
export function toolEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env };
  for (const name of HELPER_WITHOUT) {
    const value = out[HELD_PREFIX + name];
    if (value === undefined) continue;
    delete out[HELD_PREFIX + name];
    out[name] = value;
  }
  return out;
}
