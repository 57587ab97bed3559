/**
 * The main-thread handle on the MCP host thread (workers/mcp/host.ts). No
 * MCP client code runs here; this side keeps the server process groups, so
 * that they are killed when the engine closes, the host thread dies, or the
 * process exits without a close.
 */
import { randomUUID } from 'node:crypto';
import { BroadcastChannel, Worker } from 'node:worker_threads';
import { distPath } from '../pool/dist-paths.js';
import { ClosedError, deserializeError, WorkerCrashError } from '../protocol/errors.js';
import {
  lifeChannel,
  type McpControl,
  type McpHostData,
  type McpHostEvent,
  type McpLifeEvent,
  type McpServerSpec,
  type McpToolDef,
} from '../protocol/mcp.js';

/** How long a closing engine waits for servers to exit politely before killing their groups. */
const SHUTDOWN_MS = 3000;
/** Restarts of a dying host thread allowed within {@link RESTART_WINDOW_MS}. */
const MAX_RESTARTS = 3;
const RESTART_WINDOW_MS = 60_000;

type Pending = { resolve: (tools: McpToolDef[]) => void; reject: (err: Error) => void };
type Control = McpControl extends infer C ? (C extends { id: number } ? Omit<C, 'id'> : never) : never;

/** Process groups of every live host, killed by the one process 'exit' listener. */
const liveGroups = new Set<Set<number>>();
let exitHookInstalled = false;

function killGroups(groups: Iterable<number>): void {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // A host that exits without closing its engine must not leave MCP servers behind.
  process.on('exit', () => {
    for (const groups of liveGroups) killGroups(groups);
  });
}

/** The MCP host thread of one engine. */
export class McpHost {
  /** Random id naming the host's channels (tool module URLs carry it). */
  readonly hostId = randomUUID();
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  /** Process groups of running servers (pgid = the server's pid). */
  private readonly groups = new Set<number>();
  /** Every added server with its tools, to restore a restarted host thread. */
  private readonly servers = new Map<string, { spec: McpServerSpec; tools: McpToolDef[] }>();
  private readonly life: BroadcastChannel;
  private restarts: number[] = [];
  private closed = false;

  private readonly spillDir: string;

  /** `spillDir`: where the host thread spills large messages (the store's tmp/). */
  constructor(spillDir: string) {
    this.spillDir = spillDir;
    this.life = new BroadcastChannel(lifeChannel(this.hostId));
    this.life.unref();
    liveGroups.add(this.groups);
    installExitHook();
  }

  /** Live server process groups (for tests and diagnostics). */
  get processGroups(): number[] {
    return [...this.groups];
  }

  /** Starts a server, lists its tools, and keeps it for calls. EBADMODULE when it cannot start. */
  async add(spec: McpServerSpec): Promise<McpToolDef[]> {
    const tools = await this.request({ op: 'add', spec });
    this.servers.set(spec.name, { spec, tools });
    return tools;
  }

  /** Stops a server and forgets it. */
  async remove(name: string): Promise<void> {
    this.servers.delete(name);
    await this.request({ op: 'remove', name });
  }

  /**
   * Engine call `callId` has ended: the host thread aborts its requests and
   * closes its spill files. Not answered; with no thread running there is
   * nothing to release (a thread's files go with it).
   */
  callEnded(callId: string): void {
    this.worker?.postMessage({ id: 0, op: 'ended', callId } satisfies McpControl);
  }

  /** Closes every server (politely, then by force), stops the thread, and kills whatever is left. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.worker) {
      await Promise.race([
        this.request({ op: 'shutdown' }, true).catch(() => []),
        new Promise((r) => setTimeout(r, SHUTDOWN_MS).unref()),
      ]);
      await this.worker?.terminate();
    }
    killGroups(this.groups);
    this.groups.clear();
    liveGroups.delete(this.groups);
    this.life.close();
    for (const p of this.pending.values()) p.reject(new ClosedError('the engine is closed'));
    this.pending.clear();
  }

  private request(body: Control, closing = false): Promise<McpToolDef[]> {
    if (this.closed && !closing) return Promise.reject(new ClosedError('the engine is closed'));
    const worker = this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // A pending request keeps the process alive; an idle host thread does not.
      worker.ref();
      worker.postMessage({ ...body, id } as McpControl);
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const data: McpHostData = { hostId: this.hostId, spillDir: this.spillDir };
    const worker = new Worker(distPath('workers/mcp/host.js'), { workerData: data });
    worker.unref();
    worker.on('message', (e: McpHostEvent) => this.onEvent(worker, e));
    // An uncaught error ends the thread; 'exit' handles it.
    worker.on('error', () => {});
    worker.on('exit', (code) => this.onExit(worker, code));
    this.worker = worker;
    for (const { spec, tools } of this.servers.values()) {
      worker.postMessage({ id: 0, op: 'restore', spec, tools } satisfies McpControl);
    }
    return worker;
  }

  private onEvent(worker: Worker, e: McpHostEvent): void {
    if (e.t === 'spawned') this.groups.add(e.pid);
    else if (e.t === 'exited') this.groups.delete(e.pid);
    else {
      const p = this.pending.get(e.id);
      if (!p) return;
      this.pending.delete(e.id);
      if (this.pending.size === 0) worker.unref();
      if (e.error) p.reject(deserializeError(e.error));
      else p.resolve(e.tools ?? []);
    }
  }

  private onExit(worker: Worker, code: number): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    // The thread's connections are gone with it: their servers must go too.
    killGroups(this.groups);
    this.groups.clear();
    if (this.closed) return;
    const reason = `it exited with code ${code}`;
    this.life.postMessage({ t: 'host-exit', reason } satisfies McpLifeEvent);
    for (const p of this.pending.values()) p.reject(new WorkerCrashError(`the MCP host thread died: ${reason}`));
    this.pending.clear();
    const now = Date.now();
    this.restarts = this.restarts.filter((t) => now - t < RESTART_WINDOW_MS);
    // Calls of already registered tools need a host to talk to; a thread that keeps dying is left dead.
    if (this.restarts.length < MAX_RESTARTS) {
      this.restarts.push(now);
      this.start();
    }
  }
}
