/**
 * `npm run schema`: writes the generated JSON Schema of the wire contract to
 * docs/schema/sluice-protocol.json and the OpenAPI document of the HTTP API to
 * docs/schema/openapi.json (run from dist/ after the build). Prints whether each
 * file changed; commit it with the schema change that caused it.
 */
import { promises as fsp } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROTOCOL_SCHEMA_PATH, renderProtocolSchema } from '../engine/wire/json-schema.js';
import { OPENAPI_PATH, renderOpenApi } from '../engine/wire/openapi.js';

/** The package root: two levels above dist/generate/. */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Writes `text` to `rel` unless it is already there; says which. */
async function write(rel: string, text: string): Promise<void> {
  const target = join(ROOT, rel);
  const before = await fsp.readFile(target, 'utf8').catch(() => undefined);
  if (before === text) {
    process.stdout.write(`${rel} is up to date\n`);
    return;
  }
  await fsp.mkdir(dirname(target), { recursive: true });
  await fsp.writeFile(target, text);
  process.stdout.write(`${rel} ${before === undefined ? 'created' : 'updated'}\n`);
}

await write(PROTOCOL_SCHEMA_PATH, renderProtocolSchema());
await write(OPENAPI_PATH, renderOpenApi());
