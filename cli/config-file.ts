/** A `--config` file: its schema and its parsing (loaded only for `--config`: the schemas bring zod). */
import { promises as fsp } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { type McpServerConfig, mcpServerFields } from '../engine/mcp/config.js';
import { parseToolOutputOptions, type ToolOutputOptionsInput } from '../engine/presentation/options.js';
import { BadOptionError, NotFoundError } from '../engine/protocol/errors.js';
import { firstIssue } from '../engine/protocol/issues.js';
import { MCP_SERVER_NAME } from '../engine/protocol/mcp.js';
import { type SandboxSpec, sandboxSpecSchema } from '../engine/protocol/sandbox.js';
import { z } from '../engine/protocol/zod.js';
import { type ConfigEngineSettings, isUrl, type SluiceConfig } from './config.js';

const serverSchema = z.strictObject({ type: z.literal('stdio').optional(), ...mcpServerFields });

const positive = z.number().int().positive();

const fileSchema = z.strictObject({
  mcpServers: z.record(z.string(), serverSchema).optional(),
  plugins: z.array(z.string().min(1)).optional(),
  // Every engine toolOutput option (maxLines, maxBytes, maxModelBytes, preview, tailShare): checked by the
  // engine's own parser below, so a bad value names the file.
  toolOutput: z.record(z.string(), z.unknown()).optional(),
  concurrency: positive.optional(),
  // Checked by the engine's own sandbox schema below, so a bad value names the file.
  sandbox: z.unknown().optional(),
});

/** Validates a parsed config object; relative paths resolve against `baseDir`. EBADOPTION quotes the bad value. */
export function parseConfig(input: unknown, baseDir: string, origin = 'config'): SluiceConfig {
  const r = fileSchema.safeParse(input);
  if (!r.success) {
    const i = firstIssue(r.error, input);
    const where = i.path || '(top level)';
    throw new BadOptionError(`${origin}: ${where}: ${i.message} (${i.got})`, { option: where });
  }
  const c = r.data;
  const mcpServers: McpServerConfig[] = [];
  for (const [name, s] of Object.entries(c.mcpServers ?? {})) {
    if (!MCP_SERVER_NAME.test(name)) {
      throw new BadOptionError(
        `${origin}: mcpServers: server name ${JSON.stringify(name)} must match ${MCP_SERVER_NAME}`,
        {
          option: `mcpServers.${name}`,
        },
      );
    }
    const { type: _t, sandbox, ...rest } = s;
    mcpServers.push({
      ...rest,
      name,
      ...(s.cwd !== undefined ? { cwd: resolve(baseDir, s.cwd) } : {}),
      ...(sandbox !== undefined ? { sandbox: sandboxOfFile(sandbox, baseDir, `${origin}: mcpServers.${name}`) } : {}),
    });
  }
  const plugins = (c.plugins ?? []).map((p) => (isUrl(p) ? p : resolve(baseDir, p)));
  if (c.toolOutput !== undefined) parseToolOutputOptions(c.toolOutput, `${origin}: toolOutput`);
  const engine: ConfigEngineSettings = {
    ...(c.toolOutput ? { toolOutput: { ...(c.toolOutput as ToolOutputOptionsInput) } } : {}),
    ...(c.concurrency !== undefined ? { concurrency: c.concurrency } : {}),
    ...(c.sandbox !== undefined ? { sandbox: sandboxOfFile(c.sandbox, baseDir, origin) } : {}),
  };
  return { plugins, mcpServers, engine };
}

/** A config file's `sandbox` object, validated, its relative paths made relative to the file. */
function sandboxOfFile(input: unknown, baseDir: string, origin: string): SandboxSpec {
  const r = sandboxSpecSchema.safeParse(input);
  if (!r.success) {
    const i = firstIssue(r.error, input);
    const where = `sandbox${i.path ? `.${i.path}` : ''}`;
    throw new BadOptionError(`${origin}: ${where}: ${i.message} (${i.got})`, { option: where });
  }
  const s = r.data;
  const abs = (p: string) => resolve(baseDir, p);
  return {
    ...s,
    ...(s.workspace !== undefined ? { workspace: abs(s.workspace) } : {}),
    ...(s.writable ? { writable: s.writable.map(abs) } : {}),
    ...(s.hidden ? { hidden: s.hidden.map(abs) } : {}),
  };
}

/** Reads and validates a JSON config file. ENOTFOUND when it is missing, EBADOPTION when it is not valid. */
export async function loadConfigFile(file: string): Promise<SluiceConfig> {
  const path = resolve(file);
  let text: string;
  try {
    text = await fsp.readFile(path, 'utf8');
  } catch (err) {
    throw new NotFoundError(`config file ${path}: ${(err as Error).message}`, { file: path });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new BadOptionError(`config file ${path} is not valid JSON: ${(err as Error).message}`, { file: path });
  }
  return parseConfig(json, dirname(path), `config file ${path}`);
}
