/**
 * Argument validation of MCP tools, in the call worker, against the JSON
 * Schema the server listed.
 *
 * The schema is converted with zod's `z.fromJSONSchema` (zod 4.6; draft-07,
 * 2020-12, draft-4): types, required, enums, bounds, formats, `$ref`,
 * composition and `additionalProperties` as the server wrote it (no
 * `additionalProperties` means extra fields are allowed, unlike sluice's own
 * strict schemas). The converter rejects a few keywords (`if`/`then`/`else`,
 * `unevaluatedProperties`, `dependentSchemas`, ...); for such a schema sluice
 * checks only that the arguments are an object with the required top-level
 * fields and leaves the rest to the server, which validates its own input.
 * Validation never rewrites the arguments: defaults are the server's to apply.
 */
import { BadArgumentsError } from '../../engine/protocol/errors.js';
import { z } from '../../engine/protocol/zod.js';

/** Checks arguments; throws EBADARGS naming each bad field. */
export type ArgsValidator = (args: unknown) => void;

/** A validator for `schema`, and whether it is complete or only the minimal fallback. */
export function compileInputSchema(tool: string, schema: unknown): { validate: ArgsValidator; complete: boolean } {
  let converted: z.ZodType | undefined;
  try {
    converted = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch {
    converted = undefined;
  }
  if (converted) {
    const zod = converted;
    return {
      complete: true,
      validate: (args) => {
        const r = zod.safeParse(args);
        if (!r.success) throw argsError(tool, r.error.issues);
      },
    };
  }
  const required = requiredFields(schema);
  return {
    complete: false,
    validate: (args) => {
      if (typeof args !== 'object' || args === null || Array.isArray(args)) {
        throw new BadArgumentsError(`invalid arguments for ${tool}: (arguments): expected an object`);
      }
      const missing = required.filter((k) => !Object.hasOwn(args, k));
      if (missing.length > 0) {
        const problems = missing.map((k) => `${k}: required`);
        throw new BadArgumentsError(`invalid arguments for ${tool}: ${problems.join('; ')}`, { issues: problems });
      }
    },
  };
}

function requiredFields(schema: unknown): string[] {
  const r = (schema as { required?: unknown })?.required;
  return Array.isArray(r) ? r.filter((k): k is string => typeof k === 'string') : [];
}

function argsError(tool: string, issues: readonly z.core.$ZodIssue[]): BadArgumentsError {
  const problems = issues.map((i) => {
    const where = i.path.length > 0 ? i.path.join('.') : '(arguments)';
    return `${where}: ${i.message}`;
  });
  return new BadArgumentsError(`invalid arguments for ${tool}: ${problems.join('; ')}`, { issues: problems });
}
