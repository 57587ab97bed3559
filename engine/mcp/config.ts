/** MCP server configuration (`Engine.addMcpServer`, `sluice run --config`) and the mapping of a server's tool names to sluice names. */
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { BadOptionError, type SluiceError } from '../protocol/errors.js';
import { firstIssue } from '../protocol/issues.js';
import { MCP_DEFAULT_MAX_MESSAGE_BYTES, MCP_SERVER_NAME, type McpServerSpec } from '../protocol/mcp.js';
import type { SandboxPolicy, SandboxSpec } from '../protocol/sandbox.js';
import { z } from '../protocol/zod.js';

export { MCP_SERVER_NAME };

/** One MCP server, started over stdio. */
export interface McpServerConfig {
  /** `[a-z][a-z0-9_-]{0,31}`: the prefix of its tools' names (`<name>.<tool>`). */
  name: string;
  /** Executable, looked up on PATH (no shell). */
  command: string;
  /** Arguments. @default [] */
  args?: string[];
  /** Environment on top of a small default set (HOME, LOGNAME, PATH, SHELL, TERM, USER): the engine's own is not handed over. @default {} */
  env?: Record<string, string>;
  /** Working directory. @default the engine's cwd */
  cwd?: string;
  /**
   * Largest JSON-RPC message (one tool result) accepted from the server, in bytes: past 1 MiB a
   * message is spilled to the store's tmp/, so this bounds disk, not memory; a larger one fails
   * its call with ERESOURCELIMIT. @default 4 GiB
   */
  maxMessageBytes?: number;
  /**
   * The sandbox the server runs under, narrowing the engine's (docs/security.md); the variables of
   * `env` pass into it. @default the engine's `sandbox`
   */
  sandbox?: SandboxSpec;
}

/** The fields of one server (the name comes from elsewhere in a config file). */
export const mcpServerFields = {
  command: z.string().min(1),
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  cwd: z.string().min(1).optional(),
  maxMessageBytes: z
    .number()
    .int()
    .min(1024)
    .max(2 ** 34)
    .optional(),
  // Checked by the engine's sandbox narrowing, which names the field.
  sandbox: z.unknown().optional(),
};

const configSchema = z.strictObject({
  name: z.string().regex(MCP_SERVER_NAME, `must match ${MCP_SERVER_NAME}`),
  ...mcpServerFields,
});

/** Validates a server configuration and applies defaults; EBADOPTION quotes the bad value. */
export function parseMcpServerConfig(
  input: unknown,
  cwd: string,
  sandboxOf: (spec: unknown) => SandboxPolicy | undefined = () => undefined,
): McpServerSpec {
  const r = configSchema.safeParse(input);
  if (!r.success) {
    const i = firstIssue(r.error, input);
    throw new BadOptionError(`MCP server option ${i.path || '(config)'}: ${i.message} (${i.got})`, { option: i.path });
  }
  const c = r.data;
  let sandbox: SandboxPolicy | undefined;
  try {
    sandbox = sandboxOf(c.sandbox);
  } catch (err) {
    const e = err as SluiceError;
    throw new BadOptionError(`MCP server option ${e.message}`, { option: 'sandbox' }, { cause: err });
  }
  const env = c.env ?? {};
  return {
    // The variables the host gave the server pass into its sandbox as well.
    ...(sandbox ? { sandbox: { ...sandbox, env: [...new Set([...sandbox.env, ...Object.keys(env)])] } } : {}),
    name: c.name,
    command: c.command,
    args: c.args ?? [],
    env,
    cwd: resolve(cwd, c.cwd ?? '.'),
    maxMessageBytes: c.maxMessageBytes ?? MCP_DEFAULT_MAX_MESSAGE_BYTES,
  };
}

const TOOL_NAME_MAX = 64;

/**
 * Sluice names for a server's tools: `<server>.<tool>` lower-cased, every
 * character outside `[a-z0-9_.-]` replaced by `_`. A name past 64
 * characters, or shared by two tools after the mapping, is cut and suffixed
 * with six hex digits of the SHA-256 of the server's own name, so every tool
 * keeps a distinct, stable name whatever the listing order.
 */
export function sluiceToolNames(server: string, tools: readonly string[]): Map<string, string> {
  const base = new Map(tools.map((t) => [t, t.toLowerCase().replace(/[^a-z0-9_.-]/g, '_')]));
  const counts = new Map<string, number>();
  for (const b of base.values()) counts.set(b, (counts.get(b) ?? 0) + 1);
  const out = new Map<string, string>();
  for (const [tool, b] of base) {
    const plain = `${server}.${b}`;
    if (plain.length <= TOOL_NAME_MAX && counts.get(b) === 1) {
      out.set(tool, plain);
      continue;
    }
    const hash = createHash('sha256').update(tool).digest('hex').slice(0, 6);
    out.set(tool, `${plain.slice(0, TOOL_NAME_MAX - 7)}-${hash}`);
  }
  return out;
}
