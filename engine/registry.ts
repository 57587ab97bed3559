/**
 * The tool registry. The main thread never imports tool code: a tool's
 * declaration is read in a worker (a `describe` task) and validated here.
 */

import type { WorkerPool } from './pool/pool.js';
import {
  BadDeclarationError,
  BadModuleError,
  deserializeError,
  toSluiceError,
  UnknownToolError,
} from './protocol/errors.js';
import type { DescribeResult, ToolDescription, ToolIsolation } from './protocol/messages.js';
import { type OutputDeclaration, PREVIEW_MODES, type PreviewMode, validateDeclaration } from './protocol/streams.js';
import { closest, didYouMean } from './suggest.js';

/** The tool-name rule of defineTool, enforced again on the main side. */
const TOOL_NAME_RULE = /^[a-z][a-z0-9_.-]{0,63}$/;

/** A registered tool. */
export interface ToolInfo {
  /** The name calls use (`<server>.<tool>` for MCP tools). */
  name: string;
  /** What the tool does, for a model. */
  description: string;
  /** Single output or named streams, in rendering order. */
  output: OutputDeclaration;
  /** Only built-ins may opt out of retention and truncation. */
  selfPaginating: boolean;
  /** Whether its calls share worker threads (`'shared'`) or get one each (`'thread'`). */
  isolation: ToolIsolation;
  /** The tool's declared preview mode, when it declares one. */
  preview?: PreviewMode;
  /** JSON Schema of the arguments. */
  argsSchema: unknown;
  /** Module specifier loaded by workers. */
  module: string;
  /** Where the tool came from. */
  source: 'builtin' | 'plugin' | 'mcp';
}

/** What an adapter knows better than the worker: an MCP tool's module describes itself generically, the server supplies text and schema. */
export interface RegisterOverrides {
  description?: string;
  /** JSON Schema of the arguments, as shown to hosts. */
  argsSchema?: unknown;
}

/** Asks a worker to describe a tool module: EBADMODULE when it cannot be imported or exports no tool, EBADDECL for a bad declaration. */
export async function describeModule(pool: WorkerPool, module: string): Promise<ToolDescription> {
  try {
    const r = (await pool.run({ kind: 'describe', module })) as DescribeResult;
    if ('error' in r) throw deserializeError(r.error);
    return r;
  } catch (err) {
    const e = toSluiceError(err, 'EBADMODULE');
    if (e.code === 'EBADMODULE' || e.code === 'EBADDECL') throw e;
    throw new BadModuleError(`${module}: ${e.message}`, { module });
  }
}

/** Tools by name. */
export class Registry {
  private readonly tools = new Map<string, ToolInfo>();

  /** Describes the module in a worker, validates the declaration and registers it. */
  async register(
    pool: WorkerPool,
    module: string,
    source: ToolInfo['source'],
    overrides: RegisterOverrides = {},
  ): Promise<ToolInfo> {
    return this.add(await describeModule(pool, module), module, source, overrides);
  }

  /** Validates and registers a description obtained without a worker (the built-ins' generated ones). */
  add(d: ToolDescription, module: string, source: ToolInfo['source'], overrides: RegisterOverrides = {}): ToolInfo {
    let output: OutputDeclaration;
    try {
      output = validateDeclaration(d.output, `tool ${d.name}`);
    } catch (err) {
      throw new BadDeclarationError(`${module}: ${(err as Error).message}`, { module });
    }
    if (d.selfPaginating && source !== 'builtin') {
      throw new BadModuleError(`${module}: only built-in tools may opt out of output retention (selfPaginating)`, {
        module,
      });
    }
    if (d.preview !== undefined && !PREVIEW_MODES.includes(d.preview)) {
      throw new BadDeclarationError(
        `${module}: preview must be ${PREVIEW_MODES.map((m) => JSON.stringify(m)).join(' or ')}, got ${JSON.stringify(d.preview)}`,
        { module },
      );
    }
    if (d.selfPaginating && output.kind !== 'single') {
      throw new BadDeclarationError(`${module}: a self-paginating tool has single output`, { module });
    }
    const existing = this.tools.get(d.name);
    if (existing && existing.module !== module) {
      throw new BadModuleError(`${module}: a tool named ${d.name} is already registered from ${existing.module}`, {
        module,
        tool: d.name,
      });
    }
    // defineTool checks the name, but a module can forge its brand: the main side checks again.
    if (typeof d.name !== 'string' || !TOOL_NAME_RULE.test(d.name)) {
      throw new BadDeclarationError(`${module}: tool name ${JSON.stringify(d.name)} must match ${TOOL_NAME_RULE}`, {
        module,
      });
    }
    const info: ToolInfo = {
      name: d.name,
      description: overrides.description ?? d.description,
      output,
      selfPaginating: d.selfPaginating === true,
      // A description without the field gets the safe choice.
      isolation: d.isolation === 'shared' ? 'shared' : 'thread',
      ...(d.preview !== undefined ? { preview: d.preview } : {}),
      argsSchema: overrides.argsSchema ?? d.argsSchema,
      module,
      source,
    };
    this.tools.set(info.name, info);
    return info;
  }

  /** The tool named `name`, or EUNKNOWNTOOL. */
  get(name: string): ToolInfo {
    const t = this.tools.get(name);
    if (!t) {
      const names = [...this.tools.keys()];
      throw new UnknownToolError(
        `no tool named ${JSON.stringify(name)}${didYouMean(name, names, true)} (registered: ${names.join(', ')})`,
        { tool: name, ...(closest(name, names) ? { suggestion: closest(name, names) } : {}) },
      );
    }
    return t;
  }

  /** Removes a tool (an adapter undoing a registration it could not complete). */
  unregister(name: string): void {
    this.tools.delete(name);
  }

  /** Every registered tool. */
  list(): ToolInfo[] {
    return [...this.tools.values()];
  }
}
