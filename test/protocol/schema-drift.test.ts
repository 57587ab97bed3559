/**
 * The committed JSON Schema (docs/schema/sluice-protocol.json) is exactly
 * what engine/wire/schemas.ts generates. If this fails, the wire contract
 * changed: run `npm run schema`, bump PROTOCOL_VERSION when the change
 * breaks readers, and update docs/protocol.md (see AGENTS.md).
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../engine/protocol/errors.js';
import { PROTOCOL_VERSION } from '../../engine/protocol/messages.js';
import { PROTOCOL_SCHEMA_PATH, protocolJsonSchema, renderProtocolSchema } from '../../engine/wire/json-schema.js';
import { WIRE_SCHEMAS } from '../../engine/wire/schemas.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('generated JSON Schema', () => {
  it('the committed schema is the generated one (run `npm run schema` after changing engine/wire/schemas.ts)', () => {
    const committed = readFileSync(join(ROOT, PROTOCOL_SCHEMA_PATH), 'utf8');
    expect(committed).toBe(renderProtocolSchema());
  });

  it('names the protocol version and defines every published shape, with every $ref resolving', () => {
    const doc = protocolJsonSchema() as { 'x-sluice-protocol-version': number; $defs: Record<string, unknown> };
    expect(doc['x-sluice-protocol-version']).toBe(PROTOCOL_VERSION);
    expect(Object.keys(doc.$defs)).toEqual(Object.keys(WIRE_SCHEMAS));
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/\$defs\/([A-Za-z]+)"/g)].map((m) => m[1] as string);
    expect(refs.length).toBeGreaterThan(10);
    for (const r of refs) expect(doc.$defs).toHaveProperty(r);
    expect((doc.$defs.ErrorCode as { enum: string[] }).enum).toEqual([...ERROR_CODES]);
  });

  it('the error-code table of docs/protocol.md lists exactly ERROR_CODES', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'protocol.md'), 'utf8');
    const table = [...doc.matchAll(/^\| `(E[A-Z]+)` +\|/gm)].map((m) => m[1]);
    expect(table).toEqual([...ERROR_CODES]);
  });
});
