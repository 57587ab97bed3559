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
/** The spill file of each request whose result was sent with one, until the worker releases it or cancels. */
const spillOf = new Map<string, string>();
/** Request ids already handled, newest last: a request sent again (see McpLifeEvent) runs once. */
const seen = new Set<string>();
const SEEN_MAX = 4096;
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
      spillOf.clear();
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
    inflight.get(m.id)?.abort(new CancelledError('cancelled by the caller'));
    // Cancelled after its result was sent: the worker gave up on it and will never read or release it.
    const token = spillOf.get(m.id);
    if (token !== undefined) {
      spillOf.delete(m.id);
      await releaseSpill(token);
    }
    return;
  }
  if (m.t === 'release') {
    for (const [id, token] of spillOf) if (token === m.token) spillOf.delete(id);
    await releaseSpill(m.token);
    return;
  }
  if (seen.has(m.id)) return;
  seen.add(m.id);
  if (seen.size > SEEN_MAX) seen.delete(seen.values().next().value as string);
  const out = new BroadcastChannel(replyChannel(hostId, m.id));
  const reply = (r: McpReply) => out.postMessage(r);
  const ac = new AbortController();
  inflight.set(m.id, ac);
  let spill: string | undefined;
  try {
    reply({ t: 'accepted' });
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
      onProgress: (p) => reply({ t: 'progress', ...p }),
    });
    spill = outcome.spilled?.token;
    if (ac.signal.aborted) throw ac.signal.reason;
    reply({ t: 'result', outcome });
    // From here the worker owns the spill: it releases it once copied, or cancels.
    if (spill !== undefined) spillOf.set(m.id, spill);
    spill = undefined;
  } catch (err) {
    reply({ t: 'error', error: serializeError(err) });
  } finally {
    inflight.delete(m.id);
    out.close();
    // A result that was never sent: nobody will read its spill.
    if (spill !== undefined) await releaseSpill(spill);
  }
}

control.on('message', (m: McpControl) => void onControl(m));
const requests = new BroadcastChannel(requestChannel(hostId));
requests.onmessage = (ev) => void onRequest((ev as unknown as { data: McpRequest }).data);
// Listening now: call workers that sent a request while this thread was starting send it again.
const life = new BroadcastChannel(lifeChannel(hostId));
life.postMessage({ t: 'host-ready' } satisfies McpLifeEvent);
life.close();
