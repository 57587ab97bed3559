/**
 * MCP servers of one engine: adds a server through the host thread, then
 * registers each of its tools on the ordinary registry path, described and
 * validated in a worker like any plugin.
 */
import { pathToFileURL } from 'node:url';
import { distPath } from '../pool/dist-paths.js';
import { BadModuleError, BadOptionError } from '../protocol/errors.js';
import type { McpServerSpec, McpToolDef } from '../protocol/mcp.js';
import type { SandboxPolicy } from '../protocol/sandbox.js';
import type { RegisterOverrides, ToolInfo } from '../registry.js';
import { type McpServerConfig, parseMcpServerConfig, sluiceToolNames } from './config.js';
import { McpHost } from './host.js';

/** What the MCP servers need from their engine. */
export interface McpServersDeps {
  /** Working directory servers default to. */
  cwd: string;
  /** Where large messages are spilled: the store's tmp/. */
  spillDir: string;
  /** Registers a tool module as an MCP tool. */
  register(module: string, overrides: RegisterOverrides): Promise<ToolInfo>;
  /** Registered tools (to refuse a name clash before anything is registered). */
  tools(): ToolInfo[];
  /** Undoes a registration of a server whose add failed. */
  unregister(name: string): void;
  /** The policy a server's `sandbox` entry resolves to, narrowing the engine's. */
  sandboxOf(spec: unknown): SandboxPolicy | undefined;
}

/** The MCP servers of one engine. */
export class McpServers {
  private readonly deps: McpServersDeps;
  private host: McpHost | undefined;
  private readonly specs = new Map<string, McpServerSpec>();

  constructor(deps: McpServersDeps) {
    this.deps = deps;
  }

  /**
   * Starts the server and registers each tool as `<server>.<tool>`.
   * EBADOPTION for an invalid or duplicate configuration, EBADMODULE when the
   * server cannot be started or listed or a name is taken (then nothing of it stays).
   */
  async add(config: McpServerConfig): Promise<ToolInfo[]> {
    const spec = parseMcpServerConfig(config, this.deps.cwd, this.deps.sandboxOf);
    if (this.specs.has(spec.name)) {
      throw new BadOptionError(`an MCP server named ${JSON.stringify(spec.name)} is already added`, {
        option: 'name',
      });
    }
    this.specs.set(spec.name, spec);
    this.host ??= new McpHost(this.deps.spillDir);
    const host = this.host;
    let defs: McpToolDef[];
    try {
      defs = await host.add(spec);
    } catch (err) {
      this.specs.delete(spec.name);
      throw err;
    }
    const registered: ToolInfo[] = [];
    try {
      const names = sluiceToolNames(
        spec.name,
        defs.map((d) => d.name),
      );
      const entry = pathToFileURL(distPath('workers/mcp/tool.js')).href;
      const modules = defs.map((def) => {
        const name = names.get(def.name) as string;
        const query = new URLSearchParams({ h: host.hostId, s: spec.name, t: def.name, n: name });
        return { def, name, module: `${entry}?${query}` };
      });
      // Every name is checked before any is registered, so a clash leaves nothing half added.
      const taken = new Map(this.deps.tools().map((t) => [t.name, t.module]));
      for (const { def, name } of modules) {
        const other = taken.get(name);
        if (other !== undefined) {
          throw new BadModuleError(
            `MCP server ${JSON.stringify(spec.name)}: its tool ${JSON.stringify(def.name)} would be named ${name}, which is already registered from ${other}`,
            { server: spec.name, tool: name },
          );
        }
      }
      for (const { def, module } of modules) {
        registered.push(
          await this.deps.register(module, { description: def.description, argsSchema: def.inputSchema }),
        );
      }
      return registered;
    } catch (err) {
      for (const t of registered) this.deps.unregister(t.name);
      this.specs.delete(spec.name);
      await host.remove(spec.name).catch(() => {});
      throw err;
    }
  }

  /** Names of the added servers. */
  names(): string[] {
    return [...this.specs.keys()];
  }

  /** Live server process groups (for tests and diagnostics). */
  get processGroups(): number[] {
    return this.host?.processGroups ?? [];
  }

  /** Call `callId` of one of these servers' tools has ended: the host thread lets go of what it holds for it. */
  callEnded(callId: string): void {
    this.host?.callEnded(callId);
  }

  /** Stops every server and the host thread. */
  async close(): Promise<void> {
    await this.host?.close();
  }
}
