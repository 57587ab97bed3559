/**
 * The MCP host thread: a dedicated worker (not a pool thread) owning one
 * client connection per configured server, so a stateful server sees one
 * client, the handshake is paid once, a terminated call worker does not take
 * the connection with it, and the main thread still kills the groups if
 * this thread dies (docs/adapters.md). Call workers reach it over
 * BroadcastChannels (engine/protocol/mcp.ts says why).
 */
import { BroadcastChannel, parentPort, workerData } from 'node:worker_threads';
import {
  BadModuleError,
  CancelledError,
  ClosedError,
  ProtocolError,
  serializeError,
  UnknownToolError,
} from '../../engine/protocol/errors.js';
import {
  lifeChannel,
  type McpControl,
  type McpHostData,
  type McpHostEvent,
  type McpLifeEvent,
  type McpReply,
  type McpRequest,
  type McpServerSpec,
  type McpToolDef,
  replyChannel,
  requestChannel,
} from '../../engine/protocol/mcp.js';
import { PROTOCOL_VERSION } from '../../engine/protocol/messages.js';
import { Connection } from './connection.js';
import { releaseAllSpills, releaseSpill } from './spill.js';

/** Adds `key` to a set of at most `max` keys, forgetting the oldest. */
function remember(set: Set<string>, key: string, max: number): void {
  set.add(key);
  if (set.size > max) set.delete(set.values().next().value as string);
}

/** The state of engine call `callId`, made on its first request. */
function callState(callId: string): CallState {
  let state = calls.get(callId);
  if (!state) {
    state = { requests: new Set(), spills: new Set() };
    calls.set(callId, state);
  }
  return state;
}

/** Forgets a call that holds nothing (a later request of it starts afresh). */
function dropIfIdle(callId: string): void {
  const state = calls.get(callId);
  if (state && state.requests.size === 0 && state.spills.size === 0) calls.delete(callId);
}

/**
 * A spill file the transport parsed for a response to a request of engine
 * call `owner` (undefined: a request of no call, or one the SDK gave up):
 * the call holds it until it ends; with no live call nothing can claim it,
 * so it is closed now.
 */
function adoptSpill(token: string, owner: string | undefined): void {
  const state = owner === undefined ? undefined : calls.get(owner);
  if (state) state.spills.add(token);
  else void releaseSpill(token);
}

/** Engine call `callId` has ended: its requests are aborted and its spill files closed. */
async function endCall(callId: string): Promise<void> {
  remember(ended, callId, ENDED_MAX);
  const state = calls.get(callId);
  if (!state) return;
  calls.delete(callId);
  for (const ac of state.requests) ac.abort(new CancelledError('the call has ended'));
  await Promise.all([...state.spills].map(releaseSpill));
}

/** One configured server. */
interface ServerState {
  spec: McpServerSpec;
  tools: Map<string, McpToolDef>;
  conn: Connection | undefined;
  connecting: Promise<Connection> | undefined;
}

if (!parentPort) throw new Error('the MCP host runs only as a worker thread');
const control = parentPort;
const { hostId, spillDir } = workerData as McpHostData;
const servers = new Map<string, ServerState>();
const inflight = new Map<string, AbortController>();
/**
 * What the host holds for each engine call with a request running or a
 * spill file: both go when the engine says the call has ended (`ended`),
 * however it ended, its worker terminated included; no timer decides.
 */
interface CallState {
  requests: Set<AbortController>;
  spills: Set<string>;
}
const calls = new Map<string, CallState>();
/** Request ids already handled, newest last: a request sent again (see McpLifeEvent) runs once. */
const seen = new Set<string>();
const SEEN_MAX = 4096;
/**
 * Engine calls that have ended, newest last: a request of one that arrives
 * after the end (the worker's request and the engine's end travel on
 * different channels) is refused instead of starting upstream work nobody
 * would end.
 */
const ended = new Set<string>();
const ENDED_MAX = 4096;
/** Set by shutdown: no server may be started after it, or the main thread could miss its process group. */
let shuttingDown = false;

function emit(e: McpHostEvent): void {
  control.postMessage(e);
}

/** The live connection of a server, opening a new one when there is none (first call, or the server died). */
function connection(state: ServerState): Promise<Connection> {
  if (state.conn?.alive) return Promise.resolve(state.conn);
  if (shuttingDown) return Promise.reject(new ClosedError('the engine is closing'));
  if (state.conn) {
    // A dead connection is closed, not just dropped: that ends its transport (a half-written spill included).
    void state.conn.close();
    state.conn = undefined;
  }
  if (!state.connecting) {
    const server = state.spec.name;
    const opening = Connection.open(
      state.spec,
      {
        spawned: (pid) => emit({ t: 'spawned', server, pid }),
        exited: (pid) => emit({ t: 'exited', server, pid }),
        spilled: adoptSpill,
      },
      String(PROTOCOL_VERSION),
      spillDir,
    );
    state.connecting = opening;
    opening.then(
      (c) => {
        state.conn = c;
        state.connecting = undefined;
      },
      () => {
        state.connecting = undefined;
      },
    );
  }
  return state.connecting;
}

async function onControl(m: McpControl): Promise<void> {
  if (m.op === 'ended') {
    await endCall(m.callId);
    return;
  }
  try {
    if (m.op === 'add') {
      if (servers.has(m.spec.name))
        throw new ProtocolError(`MCP server ${JSON.stringify(m.spec.name)} is already added`);
      const state: ServerState = { spec: m.spec, tools: new Map(), conn: undefined, connecting: undefined };
      let tools: McpToolDef[];
      try {
        tools = await (await connection(state)).listTools();
      } catch (err) {
        await state.conn?.close();
        throw new BadModuleError(`${(err as Error).message}`, { server: m.spec.name });
      }
      state.tools = new Map(tools.map((t) => [t.name, t]));
      servers.set(m.spec.name, state);
      emit({ t: 'reply', id: m.id, tools });
    } else if (m.op === 'restore') {
      // After this thread was restarted: the definitions are known, the connection opens on the next call.
      const tools = new Map(m.tools.map((t) => [t.name, t]));
      servers.set(m.spec.name, { spec: m.spec, tools, conn: undefined, connecting: undefined });
      emit({ t: 'reply', id: m.id });
    } else if (m.op === 'remove') {
      const state = servers.get(m.name);
      servers.delete(m.name);
      const conn = state?.conn ?? (await state?.connecting?.catch(() => undefined));
      await conn?.close();
      emit({ t: 'reply', id: m.id });
    } else {
      shuttingDown = true;
      for (const ac of inflight.values()) ac.abort(new CancelledError('the engine is closing'));
      calls.clear();
      await releaseAllSpills();
      await Promise.all(
        [...servers.values()].map(async (s) => {
          const conn = s.conn ?? (await s.connecting?.catch(() => undefined));
          await conn?.close();
        }),
      );
      emit({ t: 'reply', id: m.id });
    }
  } catch (err) {
    emit({ t: 'reply', id: m.id, error: serializeError(err, 'EBADMODULE') });
  }
}

async function onRequest(m: McpRequest): Promise<void> {
  if (m.t === 'cancel') {
    // What the call holds (a spill of a result already sent) goes when the engine says it has ended.
    inflight.get(m.id)?.abort(new CancelledError('cancelled by the caller'));
    return;
  }
  if (seen.has(m.id)) return;
  remember(seen, m.id, SEEN_MAX);
  const out = new BroadcastChannel(replyChannel(hostId, m.id));
  const reply = (r: McpReply) => out.postMessage(r);
  const ac = new AbortController();
  inflight.set(m.id, ac);
  const owner = m.t === 'call' ? m.call : undefined;
  if (owner !== undefined) callState(owner).requests.add(ac);
  try {
    reply({ t: 'accepted' });
    if (owner !== undefined && ended.has(owner)) throw new CancelledError('the call has ended');
    const state = servers.get(m.server);
    const def = state?.tools.get(m.tool);
    if (!state || !def) {
      throw new UnknownToolError(`MCP server ${JSON.stringify(m.server)} has no tool ${JSON.stringify(m.tool)}`);
    }
    if (m.t === 'def') {
      reply({ t: 'def', def });
      return;
    }
    const conn = await connection(state);
    if (ac.signal.aborted) throw ac.signal.reason;
    const outcome = await conn.call(m.tool, m.arguments, {
      signal: ac.signal,
      owner: m.call,
      onProgress: (p) => reply({ t: 'progress', ...p }),
    });
    if (ac.signal.aborted) throw ac.signal.reason;
    // Its spill file, if any, was adopted by the call as it arrived (adoptSpill).
    reply({ t: 'result', outcome });
  } catch (err) {
    reply({ t: 'error', error: serializeError(err) });
  } finally {
    inflight.delete(m.id);
    out.close();
    if (owner !== undefined) {
      calls.get(owner)?.requests.delete(ac);
      dropIfIdle(owner);
    }
  }
}

control.on('message', (m: McpControl) => void onControl(m));
const requests = new BroadcastChannel(requestChannel(hostId));
requests.onmessage = (ev) => void onRequest((ev as unknown as { data: McpRequest }).data);
// Listening now: call workers that sent a request while this thread was starting send it again.
const life = new BroadcastChannel(lifeChannel(hostId));
life.postMessage({ t: 'host-ready' } satisfies McpLifeEvent);
life.close();
