/**
 * Tools beyond the built-ins for `sluice run` (and any embedder): plugin
 * modules and MCP servers from a JSON config file (docs/cli.md) and
 * command-line flags, which override the file's `toolOutput` and
 * `concurrency`. Relative paths in a file are relative to the file; on the
 * command line, to the working directory. Only the stdio transport is accepted.
 */
import { resolve } from 'node:path';
import type { Engine } from '../engine/engine.js';
import type { McpServerConfig } from '../engine/mcp/config.js';
import type { ToolOutputOptionsInput } from '../engine/presentation/options.js';
import { BadArgumentsError, BadOptionError } from '../engine/protocol/errors.js';
import { MCP_SERVER_NAME } from '../engine/protocol/mcp.js';
import type { SandboxSpec } from '../engine/protocol/sandbox.js';
import { SANDBOX_FILESYSTEM_MODES, SANDBOX_NETWORK_MODES } from '../engine/protocol/sandbox-modes.js';
import type { ToolInfo } from '../engine/registry.js';
import { limitFlags } from './common.js';

/** The engine settings a config file (or the limit flags) may give. */
export interface ConfigEngineSettings {
  /** The engine's toolOutput options (limits per stream, preview). */
  toolOutput?: ToolOutputOptionsInput;
  /** Calls running at once. */
  concurrency?: number;
  /** The engine's sandbox (docs/security.md). */
  sandbox?: SandboxSpec;
}

/** What to add to an engine: plugin modules, then MCP servers, in order; and its settings. */
export interface SluiceConfig {
  /** Plugin module paths (absolute) or URLs. */
  plugins: string[];
  /** MCP servers, each with its name. */
  mcpServers: McpServerConfig[];
  /** Engine options, for Engine.open. */
  engine: ConfigEngineSettings;
}

/** `--config`, `--plugin`, `--mcp` and the limit flags, as `sluice run` parses them. */
export interface ConfigFlags {
  config?: string | undefined;
  plugin?: string[] | undefined;
  mcp?: string[] | undefined;
  sandbox?: string | undefined;
  network?: string | undefined;
  'max-lines'?: string | undefined;
  'max-bytes'?: string | undefined;
  concurrency?: string | undefined;
}

/** True for a URL (a plugin given as one is not a path). */
export const isUrl = (s: string) => /^[a-z][a-z0-9+.-]*:/i.test(s);

/** `--sandbox MODE` and `--network on|off` over the file's sandbox. EBADARGS for another value. */
function sandboxFlags(flags: ConfigFlags, base: SandboxSpec | undefined): SandboxSpec | undefined {
  const pick = <T extends string>(flag: string, value: string | undefined, allowed: readonly T[]): T | undefined => {
    if (value === undefined || allowed.includes(value as T)) return value as T | undefined;
    throw new BadArgumentsError(`--${flag} must be ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
  };
  const filesystem = pick('sandbox', flags.sandbox, SANDBOX_FILESYSTEM_MODES);
  const network = pick('network', flags.network, SANDBOX_NETWORK_MODES);
  if (filesystem === undefined && network === undefined) return base;
  // `--sandbox off` turns the file's sandbox off whole; its other fields cannot apply unconfined.
  if (filesystem === 'off') return { filesystem };
  return {
    ...base,
    ...(filesystem ? { filesystem } : {}),
    ...(network ? { network } : {}),
  };
}

/** Reads and validates a JSON config file. ENOTFOUND when it is missing, EBADOPTION when it is not valid. */
export async function loadConfigFile(file: string): Promise<SluiceConfig> {
  // The file's schemas bring zod: a command without --config starts its engine's first worker sooner.
  return (await import('./config-file.js')).loadConfigFile(file);
}

/**
 * Splits a command line the way a POSIX shell splits words, without running
 * one: whitespace separates, single quotes keep everything, double quotes keep
 * all but `\"` and `\\`, a backslash outside quotes escapes the next character.
 */
export function splitCommand(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i] as string;
    if (quote === "'") {
      if (ch === "'") quote = undefined;
      else word += ch;
    } else if (quote === '"') {
      if (ch === '"') quote = undefined;
      else if (ch === '\\' && (line[i + 1] === '"' || line[i + 1] === '\\')) word += line[++i];
      else word += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      inWord = true;
    } else if (ch === '\\' && i + 1 < line.length) {
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (quote) throw new BadOptionError(`unterminated ${quote} quote in ${JSON.stringify(line)}`);
  if (inWord) words.push(word);
  return words;
}

/** One `--mcp NAME=COMMAND [ARGS...]` flag. */
export function parseMcpFlag(flag: string, cwd: string): McpServerConfig {
  const eq = flag.indexOf('=');
  const name = eq === -1 ? '' : flag.slice(0, eq);
  const words = eq === -1 ? [] : splitCommand(flag.slice(eq + 1));
  if (!MCP_SERVER_NAME.test(name) || words.length === 0) {
    throw new BadOptionError(
      `--mcp takes NAME=COMMAND [ARGS...] with NAME matching ${MCP_SERVER_NAME} (got ${JSON.stringify(flag)})`,
      { option: 'mcp' },
    );
  }
  const [command, ...args] = words as [string, ...string[]];
  return { name, command, args, cwd };
}

/** The config from `--config FILE` (if any), then the `--plugin` and `--mcp` flags, and the limit flags over its settings. */
export async function loadRunConfig(flags: ConfigFlags, cwd: string): Promise<SluiceConfig> {
  // Flags are checked first: a bad one is reported before a config file is read.
  const limits = limitFlags(flags);
  const base: SluiceConfig = flags.config
    ? await loadConfigFile(resolve(cwd, flags.config))
    : { plugins: [], mcpServers: [], engine: {} };
  for (const p of flags.plugin ?? []) base.plugins.push(isUrl(p) ? p : resolve(cwd, p));
  for (const m of flags.mcp ?? []) base.mcpServers.push(parseMcpFlag(m, cwd));
  const toolOutput = { ...base.engine.toolOutput, ...limits.toolOutput };
  const sandbox = sandboxFlags(flags, base.engine.sandbox);
  const { sandbox: _file, ...engine } = base.engine;
  base.engine = {
    ...engine,
    ...(sandbox ? { sandbox } : {}),
    ...(Object.keys(toolOutput).length > 0 ? { toolOutput } : {}),
    ...(limits.concurrency !== undefined ? { concurrency: limits.concurrency } : {}),
  };
  return base;
}

/**
 * Registers the plugins, then adds the MCP servers, in order; resolves to
 * every tool registered. The first failure rejects (EBADMODULE, EBADDECL,
 * EBADOPTION); what was added before it stays added.
 */
export async function applyConfig(
  engine: Engine,
  config: Pick<SluiceConfig, 'plugins' | 'mcpServers'>,
): Promise<ToolInfo[]> {
  const tools: ToolInfo[] = [];
  for (const p of config.plugins) tools.push(await engine.register(p));
  for (const s of config.mcpServers) tools.push(...(await engine.addMcpServer(s)));
  return tools;
}
