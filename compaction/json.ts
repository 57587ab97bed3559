/**
 * JSON values as the model history carries them (tool arguments, result
 * metadata). The history crosses boundaries (session logs, hosts, the
 * summarizer), so everything in it must survive `JSON.stringify` unchanged:
 * no `undefined`, functions, class instances, non-finite numbers or cycles.
 *
 * The check walks own enumerable keys only and never copies through a zod
 * parse, because zod's object copy drops an own `__proto__` key (it assigns
 * it, replacing the prototype), and an argument named `__proto__` must not
 * change what a structural lookup of `filePath` finds.
 */

/** A JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object (the usual shape of tool arguments and metadata). */
export type JsonObject = { [key: string]: JsonValue };

/** Deepest nesting accepted; deeper values (or cycles) are rejected rather than overflowing the stack. */
export const MAX_JSON_DEPTH = 256;

/** True for `{}`-style objects: plain prototype or none, not arrays, dates, maps or class instances. */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** True when `v` is a JSON value that `JSON.stringify` round-trips exactly. */
export function isJsonValue(v: unknown, depth = 0): v is JsonValue {
  if (depth > MAX_JSON_DEPTH) return false;
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isFinite(v);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      // A hole would stringify as null: not a round trip.
      if (!Object.hasOwn(v, i) || !isJsonValue(v[i], depth + 1)) return false;
    }
    return true;
  }
  if (!isPlainObject(v)) return false;
  if (Object.getOwnPropertySymbols(v).length > 0) return false;
  for (const key of Object.keys(v)) {
    if (!isJsonValue(v[key], depth + 1)) return false;
  }
  return true;
}

/** True when `v` is a plain object whose values are all JSON values. */
export function isJsonObject(v: unknown): v is JsonObject {
  return isPlainObject(v) && isJsonValue(v);
}

/**
 * A deep copy of a JSON value. `JSON.parse` defines every key as an own
 * property, `__proto__` included, so the copy has exactly the same keys.
 */
export function cloneJson<T extends JsonValue>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/**
 * The object form of tool-call arguments, parsed structurally: an object is
 * taken as is, a string is parsed as JSON (providers often send arguments as
 * a JSON string). Anything that is not, or does not parse to, a plain object
 * yields undefined: it has no named arguments.
 */
export function argumentsObject(args: unknown): Record<string, unknown> | undefined {
  if (typeof args === 'string') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(args);
    } catch {
      return undefined;
    }
    return isPlainObject(parsed) ? parsed : undefined;
  }
  return isPlainObject(args) ? args : undefined;
}
