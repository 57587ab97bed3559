/**
 * The OpenAPI 3.1 document of the HTTP API, generated from the endpoint
 * table and zod's JSON Schema of the wire contract: OpenAPI 3.1 schemas are
 * JSON Schema 2020-12, so the `$defs` an endpoint needs become
 * `components.schemas` with their `$ref`s repointed, nothing translated by hand.
 */
import { HTTP_ENDPOINTS, HTTP_ERROR_STATUSES, type HttpEndpoint, type HttpParameter } from './http-api.js';
import { protocolJsonSchema } from './json-schema.js';
import { PROTOCOL_VERSION } from './schemas.js';

/** Where the committed document lives, relative to the package root. */
export const OPENAPI_PATH = 'docs/schema/openapi.json';

type JsonObject = Record<string, unknown>;

/** Statuses every authenticated endpoint may answer, besides its own. */
const COMMON_ERRORS = [405, 503];

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

function parameter(p: HttpParameter, where: 'query' | 'header'): JsonObject {
  return {
    name: p.name,
    in: where,
    required: p.required === true,
    description: p.description,
    schema:
      p.type === 'count'
        ? { type: 'string', pattern: '^[0-9]{1,15}$' }
        : p.type === 'flag'
          ? { type: 'string', enum: ['true', 'false'] }
          : { type: 'string', minLength: 1 },
  };
}

function operation(e: HttpEndpoint): JsonObject {
  const parameters: JsonObject[] = [
    ...Object.entries(e.pathParams ?? {}).map(([name, description]) => ({
      name,
      in: 'path',
      required: true,
      description,
      schema: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,256}$' },
    })),
    ...(e.query ?? []).map((p) => parameter(p, 'query')),
    ...(e.headers ?? []).map((p) => parameter(p, 'header')),
  ];
  const responses: JsonObject = {};
  for (const [status, r] of Object.entries(e.responses)) {
    const content: JsonObject = {};
    if (r.json) content['application/json'] = { schema: ref(r.json) };
    if (r.bytes)
      content['application/octet-stream'] = {
        schema: { type: 'string', contentMediaType: 'application/octet-stream' },
      };
    if (r.text) content[r.text] = { schema: { type: 'string' } };
    if (r.events) {
      content['text/event-stream'] = {
        schema: { type: 'string', description: `Server-sent events; each data line is one ${r.events} as JSON.` },
        'x-sluice-event-schema': ref(r.events),
      };
    }
    if (e.operationId === 'getOpenApi') content['application/json'] = { schema: { type: 'object' } };
    const headers = Object.fromEntries(
      Object.entries(r.headers ?? {}).map(([h, description]) => [h, { description, schema: { type: 'string' } }]),
    );
    responses[status] = {
      description: r.description,
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
      ...(Object.keys(content).length > 0 ? { content } : {}),
    };
  }
  responses['401'] = {
    description: 'Missing or wrong bearer token: empty body, WWW-Authenticate: Bearer.',
    headers: { 'WWW-Authenticate': { schema: { type: 'string', const: 'Bearer' } } },
  };
  for (const status of [...new Set([...e.errors, ...COMMON_ERRORS])].sort((a, b) => a - b)) {
    responses[String(status)] = {
      description: HTTP_ERROR_STATUSES[status] ?? 'an error',
      ...(status === 405
        ? { headers: { Allow: { description: 'the methods the route takes', schema: { type: 'string' } } } }
        : {}),
      content: { 'application/json': { schema: ref('ErrorBody') } },
    };
  }
  return {
    operationId: e.operationId,
    summary: e.summary,
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(e.body
      ? {
          requestBody: {
            required: e.body.optional !== true,
            content: { 'application/json': { schema: ref(e.body.schema) } },
          },
        }
      : {}),
    responses,
  };
}

/** Every `$defs` name `value` refers to. */
function refsOf(value: unknown, out: Set<string>): Set<string> {
  if (Array.isArray(value)) for (const v of value) refsOf(v, out);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') out.add(v.replace(/^#\/(\$defs|components\/schemas)\//, ''));
      else refsOf(v, out);
    }
  }
  return out;
}

/** `value` with `#/$defs/X` references repointed to `#/components/schemas/X`. */
function repoint(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value).replaceAll('"#/$defs/', '"#/components/schemas/'));
}

/** The whole OpenAPI 3.1 document. */
export function openApiDocument(): JsonObject {
  const paths: Record<string, JsonObject> = {};
  for (const e of HTTP_ENDPOINTS) {
    paths[e.path] = { ...paths[e.path], [e.method]: operation(e) };
  }
  // Only the shapes the endpoints reach, with everything they reference in turn.
  const defs = (protocolJsonSchema() as { $defs: Record<string, unknown> }).$defs;
  const wanted = refsOf(paths, new Set<string>());
  const queue = [...wanted];
  while (queue.length > 0) {
    const name = queue.pop() as string;
    for (const r of refsOf(defs[name], new Set<string>())) {
      if (!wanted.has(r)) {
        wanted.add(r);
        queue.push(r);
      }
    }
  }
  const schemas: Record<string, unknown> = {};
  for (const name of Object.keys(defs)) if (wanted.has(name)) schemas[name] = repoint(defs[name]);
  return {
    openapi: '3.1.0',
    info: {
      title: 'sluice HTTP API',
      version: String(PROTOCOL_VERSION),
      description:
        'The API of `sluice serve`. Generated from engine/wire/http-api.ts and engine/wire/schemas.ts by `npm run schema`; do not edit. See docs/http.md.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    'x-sluice-protocol-version': PROTOCOL_VERSION,
    servers: [{ url: 'http://127.0.0.1:7433', description: 'sluice serve, default host and port' }],
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'The token in <store>/server.token' },
      },
      schemas,
    },
  };
}

/** The document exactly as committed: two-space JSON and a final newline. */
export function renderOpenApi(): string {
  return `${JSON.stringify(openApiDocument(), null, 2)}\n`;
}
