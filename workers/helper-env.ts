/**
 * The spawn helper's own environment, and the one it gives the processes it
 * starts.
 *
 * The helper is a Node process, so the variables that configure Node apply
 * to it too, though it needs none of them. `NODE_EXTRA_CA_CERTS` is read
 * and parsed when a Node process starts: with a distribution's bundle
 * (~140 certificates) that took a bare Node's start from ~20-25 ms to
 * ~50-60 ms on this project's machine, on every helper start. `NODE_OPTIONS` can
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
 * The environment to start the helper with: `env` with every
 * {@link HELPER_WITHOUT} variable, and every variable whose name already
 * starts with {@link HELD_PREFIX}, renamed to {@link HELD_PREFIX} + its
 * name. The mapping is reversible ({@link toolEnv}), so nothing of the
 * engine's environment is lost or invented, whatever names it has.
 */
export function helperEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    const held = (HELPER_WITHOUT as readonly string[]).includes(name) || name.startsWith(HELD_PREFIX);
    out[held ? HELD_PREFIX + name : name] = value;
  }
  return out;
}

/**
 * The environment the helper gives what it starts: its own with one
 * {@link HELD_PREFIX} taken off every name that has it, so a tool's
 * environment is the engine's, exactly.
 */
export function toolEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    out[name.startsWith(HELD_PREFIX) ? name.slice(HELD_PREFIX.length) : name] = value;
  }
  return out;
}
