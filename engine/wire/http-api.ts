/**
 * The HTTP API as data: one row per endpoint of `sluice serve`, naming its
 * shapes by their `$defs` names in {@link WIRE_SCHEMAS}. The OpenAPI
 * document is generated from this table and the schemas alone
 * (test/server/openapi.test.ts fails on a route without a row, or the reverse).
 */
import type { WIRE_SCHEMAS } from './schemas.js';

/** A `$defs` name of the wire contract. */
export type WireSchemaName = keyof typeof WIRE_SCHEMAS & string;

/** One query parameter or header: a decimal count, a flag, or a string. */
export interface HttpParameter {
  name: string;
  description: string;
  /** `count`: decimal digits; `flag`: `true` or `false`; `string`: any non-empty text. */
  type: 'count' | 'flag' | 'string';
  required?: boolean;
}

/** One response an endpoint gives (besides its errors). */
export interface HttpResponse {
  description: string;
  /** A JSON body of this shape; absent for a body-less response. */
  json?: WireSchemaName;
  /** A server-sent event stream whose `data` lines are this shape. */
  events?: WireSchemaName;
  /** The exact bytes of a page (`application/octet-stream`), offered beside the JSON. */
  bytes?: boolean;
  /** A text body of this media type (the Prometheus exposition of /v1/metrics). */
  text?: string;
  /** Response headers: name → description. */
  headers?: Record<string, string>;
}

/** One endpoint. */
export interface HttpEndpoint {
  method: 'get' | 'post';
  /** OpenAPI path template: `/v1/calls/{id}`. */
  path: string;
  operationId: string;
  summary: string;
  /** Path parameters of the template, name → description. */
  pathParams?: Record<string, string>;
  query?: HttpParameter[];
  /** Request headers the endpoint reads (beyond Authorization). */
  headers?: HttpParameter[];
  /** The JSON request body, and whether it may be omitted. */
  body?: { schema: WireSchemaName; optional?: boolean };
  responses: Record<number, HttpResponse>;
  /** Error statuses this endpoint answers with an ErrorBody (401, 405 and 503 apply to all). */
  errors: number[];
}

/** Every error status and when it happens (docs/http.md, "Errors"). */
export const HTTP_ERROR_STATUSES: Readonly<Record<number, string>> = {
  400: 'EBADARGS (invalid body, query, header or id), EBADURI, EBADOPTION, ENOTMANIFEST, EUNKNOWNTOOL',
  403: 'EDENIED: the approval policy refused (a file outside the working directory)',
  404: 'ENOTFOUND (unknown call, session or artifact), EUNKNOWNSTREAM',
  405: 'EBADMETHOD: the route does not take this method; `Allow` lists those it does',
  413: 'ERESOURCELIMIT (request body too large; whole lines of a page over 2 MiB), ESIZELIMIT',
  415: 'EBADARGS (a body that is not application/json), EBINARY (reading a binary file)',
  429: 'ERESOURCELIMIT: too many calls running through this server',
  500: 'EINTEGRITY, EDISK, EWORKERCRASH, EPROTOCOL and any other code',
  503: 'ECLOSED (the server is shutting down), ECANCELLED (a read cancelled by shutdown)',
  504: 'ETIMEOUT',
};

const ID = { id: 'a call id (as returned by POST /v1/calls)' };

/** The endpoints, in docs/http.md order. */
export const HTTP_ENDPOINTS: readonly HttpEndpoint[] = [
  {
    method: 'get',
    path: '/v1/info',
    operationId: 'getInfo',
    summary: 'The server: name, package version, protocol version.',
    responses: { 200: { description: 'The server.', json: 'InfoResponse' } },
    errors: [400],
  },
  {
    method: 'get',
    path: '/v1/openapi.json',
    operationId: 'getOpenApi',
    summary: 'This OpenAPI document (also docs/schema/openapi.json, and sluice/openapi in the package).',
    responses: { 200: { description: 'The OpenAPI 3.1 document of the HTTP API.' } },
    errors: [400],
  },
  {
    method: 'get',
    path: '/v1/tools',
    operationId: 'listTools',
    summary: 'The registered tools, with their argument schemas.',
    responses: { 200: { description: 'Every registered tool.', json: 'ToolsResponse' } },
    errors: [400],
  },
  {
    method: 'get',
    path: '/v1/calls',
    operationId: 'listCalls',
    summary:
      'The calls this server started that are running or still kept, oldest first, with bytes and lines per stream.',
    responses: { 200: { description: 'Every running and kept call.', json: 'CallsResponse' } },
    errors: [400],
  },
  {
    method: 'get',
    path: '/v1/events',
    operationId: 'streamServerEvents',
    summary:
      "Every call's new summary as it starts, progresses and ends, as server-sent events (unnumbered; after `lagged`, list the calls again).",
    responses: {
      200: { description: 'Events: call (a CallSummary), lagged.', events: 'ServerEvent' },
    },
    errors: [400],
  },
  {
    method: 'get',
    path: '/v1/stats',
    operationId: 'getStats',
    summary: "The engine's counters since it opened: calls started and ended, bytes captured; calls running here.",
    responses: { 200: { description: 'The counters.', json: 'StatsResponse' } },
    errors: [400],
  },
  {
    method: 'post',
    path: '/v1/calls',
    operationId: 'startCall',
    summary:
      "Starts a call. The request is validated, not the tool's arguments: bad arguments give 202, then a failed result with EBADARGS.",
    body: { schema: 'CallRequest' },
    responses: {
      202: {
        description: 'The call started.',
        json: 'CallAccepted',
        headers: { Location: 'the call: /v1/calls/<id>' },
      },
    },
    errors: [400, 413, 415, 429, 500],
  },
  {
    method: 'get',
    path: '/v1/calls/{id}',
    operationId: 'getCall',
    summary: 'The terminal result of a call, or 202 while it runs (a long poll with `wait`).',
    pathParams: ID,
    query: [{ name: 'wait', type: 'count', description: 'seconds to wait for the end first, 0 to 60 (default 0)' }],
    responses: {
      200: { description: 'The call ended: its terminal result.', json: 'TerminalResult' },
      202: { description: 'The call is still running.', json: 'CallPending' },
    },
    errors: [400, 404],
  },
  {
    method: 'get',
    path: '/v1/calls/{id}/events',
    operationId: 'streamCallEvents',
    summary: "The call's live events as server-sent events, resumable with Last-Event-ID.",
    pathParams: ID,
    query: [
      { name: 'lastEventId', type: 'count', description: 'the Last-Event-ID, for clients that cannot set headers' },
      {
        name: 'progress',
        type: 'flag',
        description: 'true: also send unnumbered progress events (bytes and lines per stream, at most every 250 ms)',
      },
    ],
    headers: [{ name: 'Last-Event-ID', type: 'count', description: 'the id of the last event received' }],
    responses: {
      200: {
        description: 'Events: started, display, lagged, completed (always last); progress when asked for.',
        events: 'SubscriptionEvent',
      },
      204: { description: 'The client already has the completed event.' },
    },
    errors: [400, 404],
  },
  {
    method: 'post',
    path: '/v1/calls/{id}/cancel',
    operationId: 'cancelCall',
    summary: 'Asks the call to stop; it ends cancelled with the output it produced so far.',
    pathParams: ID,
    body: { schema: 'CancelRequest', optional: true },
    responses: {
      200: { description: 'The call had already ended: its status.', json: 'CancelResponse' },
      202: { description: 'The call is being cancelled.', json: 'CancelResponse' },
    },
    errors: [400, 404, 413, 415],
  },
  {
    method: 'get',
    path: '/v1/read',
    operationId: 'read',
    summary:
      'One page of an artifact, a file or a directory through the read tool; the exact bytes when Accept prefers application/octet-stream.',
    query: [
      {
        name: 'filePath',
        type: 'string',
        required: true,
        description: 'artifact://<digest>[/<stream>], or a path inside the working directory',
      },
      { name: 'offset', type: 'count', description: 'zero-based first line (default 0)' },
      { name: 'limit', type: 'count', description: 'lines in the page, 1 to 2000 (default 2000)' },
      {
        name: 'byteOffset',
        type: 'count',
        description: 'artifacts only: bytes into line `offset` where the page starts',
      },
    ],
    responses: {
      200: {
        description: 'The page (JSON), or its exact stored bytes with the other fields in headers.',
        json: 'ReadPage',
        bytes: true,
        headers: {
          'sluice-offset': 'octet-stream only: the first line',
          'sluice-lines': 'octet-stream only: lines in the page',
          'sluice-total-lines': 'octet-stream only: lines in the artifact',
          'sluice-next-offset': 'octet-stream only: the next line, or null at the end',
          'sluice-next-byte-offset': 'octet-stream only: bytes into that line, or null',
          'sluice-lossy': 'octet-stream only: true when the bytes are not valid UTF-8',
        },
      },
    },
    errors: [400, 403, 404, 413, 415, 500],
  },
  {
    method: 'get',
    path: '/v1/search',
    operationId: 'search',
    summary:
      'One page of matching lines of an artifact, like grep -n with zero-based line numbers (each a read offset); continues at `offset`.',
    query: [
      { name: 'filePath', type: 'string', required: true, description: 'artifact://<digest>[/<stream>]' },
      { name: 'pattern', type: 'string', required: true, description: 'the text to find, or a regular expression' },
      { name: 'regex', type: 'flag', description: 'true: `pattern` is a regular expression (RE2 syntax, linear time)' },
      { name: 'ignoreCase', type: 'flag', description: 'true: ignore letter case' },
      { name: 'context', type: 'count', description: 'lines of context before and after each match, 0 to 10' },
      { name: 'limit', type: 'count', description: 'most matches in the page, 1 to 1000 (default 100)' },
      { name: 'offset', type: 'count', description: 'zero-based line to continue from (a nextOffset)' },
    ],
    responses: { 200: { description: 'The page of matches.', json: 'SearchResult' } },
    errors: [400, 403, 404, 500],
  },
  {
    method: 'get',
    path: '/v1/metrics',
    operationId: 'metrics',
    summary:
      'Prometheus metrics of the engine: calls, durations, bytes, credit waits, queue, threads, store, GC (needs the optional prom-client).',
    responses: { 200: { description: 'The Prometheus text exposition.', text: 'text/plain; version=0.0.4' } },
    errors: [500],
  },
  {
    method: 'get',
    path: '/v1/sessions',
    operationId: 'listSessions',
    summary: 'The sessions of the store, with counts and bytes referenced.',
    responses: { 200: { description: 'Every session.', json: 'SessionsResponse' } },
    errors: [400, 500],
  },
  {
    method: 'get',
    path: '/v1/sessions/{id}/replay',
    operationId: 'replaySession',
    summary: "A session's calls rebuilt from its event log (streamed call by call).",
    pathParams: { id: 'a session id' },
    responses: { 200: { description: 'The replayed session.', json: 'ReplayedSession' } },
    errors: [400, 404, 500],
  },
  {
    method: 'post',
    path: '/v1/sessions/{id}/revert',
    operationId: 'revertSession',
    summary:
      'Reverts a session to before one of its calls: that call and the later ones leave replay and stop being GC roots.',
    pathParams: { id: 'a session id' },
    body: { schema: 'RevertRequest' },
    responses: { 200: { description: 'The calls the revert hid.', json: 'RevertResponse' } },
    errors: [400, 404, 413, 415, 500],
  },
  {
    method: 'get',
    path: '/v1/store',
    operationId: 'getStore',
    summary:
      "The store's blobs and bytes (a walk at most every 5 s) and the last collection and verification this server ran.",
    responses: { 200: { description: 'The store.', json: 'StoreResponse' } },
    errors: [400, 500],
  },
  {
    method: 'post',
    path: '/v1/gc',
    operationId: 'collectGarbage',
    summary:
      'Collects garbage (as sluice gc): blobs no live session record or pin references, older than the grace period.',
    body: { schema: 'GcRequest', optional: true },
    responses: { 200: { description: 'The report.', json: 'GcReport' } },
    errors: [400, 413, 415, 500, 504],
  },
  {
    method: 'post',
    path: '/v1/verify',
    operationId: 'verifyStore',
    summary:
      "Verifies the store and the sessions' references (as sluice verify); with repair, corrupt blobs go to quarantine.",
    body: { schema: 'VerifyRequest', optional: true },
    responses: { 200: { description: 'The report.', json: 'VerifyReport' } },
    errors: [400, 413, 415, 500],
  },
];
