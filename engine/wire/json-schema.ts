/**
 * The JSON Schema of the wire contract, by zod's own `z.toJSONSchema`: one
 * draft 2020-12 document whose `$defs` hold every published shape
 * (committed as docs/schema/sluice-protocol.json; a test fails on drift).
 */

import { z } from '../protocol/zod.js';
import { PROTOCOL_VERSION, WIRE_SCHEMAS } from './schemas.js';

/** Where the committed schema lives, relative to the package root. */
export const PROTOCOL_SCHEMA_PATH = 'docs/schema/sluice-protocol.json';

type JsonObject = Record<string, unknown>;

/** The `$defs` of one registry of schemas, rendered in one io mode; `$ref`s point into the shared `$defs`. */
function renderDefs(names: string[], io: 'input' | 'output'): Record<string, JsonObject> {
  const registry = z.registry<{ id: string }>();
  for (const name of names) registry.add((WIRE_SCHEMAS[name] as { schema: z.ZodType }).schema, { id: name });
  const out = z.toJSONSchema(registry, {
    io,
    target: 'draft-2020-12',
    // The chunk bytes (a transferred Uint8Array) have no JSON form: they are described, not typed.
    unrepresentable: 'any',
    uri: (id) => `#/$defs/${id}`,
  }) as { schemas: Record<string, JsonObject> };
  const defs: Record<string, JsonObject> = {};
  for (const [name, def] of Object.entries(out.schemas)) {
    // Per-definition $schema and fragment-only $id are not allowed inside one 2020-12 document.
    const { $schema: _s, $id: _i, ...rest } = def;
    defs[name] = rest;
  }
  return defs;
}

/** The whole JSON Schema document of the wire contract. */
export function protocolJsonSchema(): JsonObject {
  const entries = Object.entries(WIRE_SCHEMAS);
  const byIo = (io: 'input' | 'output') => entries.filter(([, e]) => e.io === io).map(([name]) => name);
  const rendered = { ...renderDefs(byIo('output'), 'output'), ...renderDefs(byIo('input'), 'input') };
  const $defs: Record<string, JsonObject> = {};
  for (const [name, entry] of entries) {
    $defs[name] = { description: entry.description, ...(rendered[name] as JsonObject) };
  }
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: `urn:sluice:protocol:${PROTOCOL_VERSION}`,
    title: 'sluice wire protocol',
    description:
      'Generated from engine/wire/schemas.ts by `npm run schema`; do not edit. See docs/protocol.md for what each definition means.',
    'x-sluice-protocol-version': PROTOCOL_VERSION,
    $defs,
  };
}

/** The document exactly as committed: two-space JSON and a final newline. */
export function renderProtocolSchema(): string {
  return `${JSON.stringify(protocolJsonSchema(), null, 2)}\n`;
}
