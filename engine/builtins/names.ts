/** The built-in tools' names, in registration order, and their compiled modules; their descriptions are generated into descriptions.ts. */
import { distPath } from '../pool/dist-paths.js';

/** The built-in tools, in registration order. */
export const BUILTIN_NAMES = ['bash', 'read', 'grep'] as const;

/** Name of a built-in tool. */
export type BuiltinName = (typeof BUILTIN_NAMES)[number];

/** Module path of a built-in tool. */
export function builtinTool(name: BuiltinName): string {
  return distPath(`workers/builtins/${name}.js`);
}
