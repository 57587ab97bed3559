/**
 * MCP tools' arguments checked against the server's JSON Schema, converted
 * by zod's `z.fromJSONSchema` as the server wrote it (no
 * `additionalProperties`: extra fields allowed). For keywords it rejects,
 * only an object with the required fields is checked; the server validates
 * the rest. Arguments are never rewritten: defaults are the server's.
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
