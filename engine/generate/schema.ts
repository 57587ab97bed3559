/**
 * `npm run schema`: writes the generated JSON Schema of the wire contract to
 * docs/schema/sluice-protocol.json (run from dist/ after the build). Prints
 * whether the file changed; commit it with the schema change that caused it.
 */
import { promises as fsp } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROTOCOL_SCHEMA_PATH, renderProtocolSchema } from '../wire/json-schema.js';

/** The package root: three levels above dist/engine/generate/. */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

const target = join(ROOT, PROTOCOL_SCHEMA_PATH);
const text = renderProtocolSchema();
const before = await fsp.readFile(target, 'utf8').catch(() => undefined);
if (before === text) {
  process.stdout.write(`${PROTOCOL_SCHEMA_PATH} is up to date\n`);
} else {
  await fsp.mkdir(dirname(target), { recursive: true });
  await fsp.writeFile(target, text);
  process.stdout.write(`${PROTOCOL_SCHEMA_PATH} ${before === undefined ? 'created' : 'updated'}\n`);
}
