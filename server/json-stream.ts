/**
 * Writing `{ ...fields, [key]: [...items] }` one item at a time: the HTTP
 * replay endpoint and `sluice replay --json` send sessions whose calls are
 * read back as they are written, so the document never exists whole.
 */

/**
 * Writes the document through `write`, serialising one item at a time and
 * waiting for each write. Stops (ending the iteration of `items`) when
 * `write` resolves false, the reader being gone; resolves true when the whole
 * document was written. `fields` come first, the array last.
 */
export async function writeJsonWithArray(
  write: (text: string) => Promise<boolean>,
  fields: Record<string, unknown>,
  key: string,
  items: AsyncIterable<unknown>,
): Promise<boolean> {
  const head = JSON.stringify(fields);
  if (!(await write(`${head.slice(0, -1)}${head === '{}' ? '' : ','}${JSON.stringify(key)}:[`))) return false;
  let separator = '';
  for await (const item of items) {
    if (!(await write(separator + JSON.stringify(item)))) return false;
    separator = ',';
  }
  return write(']}');
}
