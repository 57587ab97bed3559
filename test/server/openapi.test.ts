/**
 * The OpenAPI 3.1 document of the HTTP API: generated from the endpoint
 * table and the wire schemas, committed as docs/schema/openapi.json (run `npm run
 * schema` when this fails on drift), valid under the OpenAPI 3.1 schema
 * (with every $ref resolving) according to a maintained validator, in step
 * with the server's routes, and served at GET /v1/openapi.json.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterEach, describe, expect, it } from 'vitest';
import { HTTP_ENDPOINTS } from '../../engine/wire/http-api.js';
import { OPENAPI_PATH, openApiDocument, renderOpenApi } from '../../engine/wire/openapi.js';
import { PROTOCOL_VERSION, WIRE_SCHEMAS } from '../../engine/wire/schemas.js';
import { routeTable } from '../../server/routes.js';
import { cleanup, ROOT, startTestServer } from './helpers.js';

afterEach(cleanup);

/** A path of the table with sample ids in its parameters. */
const concrete = (path: string) => path.replace(/\{[a-z]+\}/g, 'sample-id.1');

describe('the OpenAPI document', () => {
  it('the committed docs/schema/openapi.json is the generated one (run `npm run schema`)', () => {
    expect(readFileSync(join(ROOT, OPENAPI_PATH), 'utf8')).toBe(renderOpenApi());
  });

  it('is valid OpenAPI 3.1, every $ref resolving; a dangling $ref is caught', async () => {
    const validator = new Validator();
    const result = await validator.validate(openApiDocument());
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    const broken = openApiDocument() as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    (broken.paths['/v1/info'] as Record<string, { responses: Record<string, unknown> }>).get!.responses['200'] = {
      description: 'x',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Missing' } } },
    };
    const bad = await new Validator().validate(broken);
    expect(bad.valid).toBe(false);
  });

  it('has exactly one operation per server route, and names only shapes of the wire contract', () => {
    const routes = routeTable();
    expect(HTTP_ENDPOINTS.length).toBe(routes.length);
    for (const e of HTTP_ENDPOINTS) {
      const matching = routes.filter((r) => r.method === e.method.toUpperCase() && r.pattern.test(concrete(e.path)));
      expect(matching.length, `${e.method} ${e.path}`).toBe(1);
      const names = [e.body?.schema, ...Object.values(e.responses).flatMap((r) => [r.json, r.events])].filter(
        (n): n is string => n !== undefined,
      );
      for (const n of names) expect(Object.hasOwn(WIRE_SCHEMAS, n), n).toBe(true);
    }
    for (const r of routes) {
      const matching = HTTP_ENDPOINTS.filter(
        (e) => r.method === e.method.toUpperCase() && r.pattern.test(concrete(e.path)),
      );
      expect(matching.length, `${r.method} ${r.pattern}`).toBe(1);
    }
    const ids = HTTP_ENDPOINTS.map((e) => e.operationId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('carries the protocol version and the components its operations reference, nothing unreachable', () => {
    const doc = openApiDocument() as {
      openapi: string;
      info: { version: string };
      components: { schemas: Record<string, unknown> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe(String(PROTOCOL_VERSION));
    const text = JSON.stringify(doc);
    expect(text).not.toContain('#/$defs/');
    const referenced = new Set([...text.matchAll(/"#\/components\/schemas\/([A-Za-z]+)"/g)].map((m) => m[1]));
    expect(new Set(Object.keys(doc.components.schemas))).toEqual(referenced);
    for (const name of ['TerminalResult', 'CallRequest', 'ErrorBody', 'ReadPage', 'SubscriptionEvent', 'ErrorCode']) {
      expect(referenced.has(name), name).toBe(true);
    }
    // Worker messages are not part of the HTTP API.
    expect(referenced.has('WorkerMessage')).toBe(false);
  });

  it('GET /v1/openapi.json serves the committed document; other methods are 405 EBADMETHOD', async () => {
    const s = await startTestServer();
    const res = await s.api('/v1/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await res.text()).toBe(readFileSync(join(ROOT, OPENAPI_PATH), 'utf8'));
    const post = await s.api('/v1/openapi.json', { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
    expect(((await post.json()) as { error: { code: string } }).error.code).toBe('EBADMETHOD');
    const unauthenticated = await fetch(`${s.url}/v1/openapi.json`);
    expect(unauthenticated.status).toBe(401);
    expect(await unauthenticated.text()).toBe('');
  });
});
