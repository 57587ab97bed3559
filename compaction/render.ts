/**
 * The summarizer input text: a deterministic rendering of history items,
 * documented in docs/compaction.md and asserted byte for byte by the tests.
 *
 * One block per item, in order, blocks separated by exactly one empty line.
 * Every line of the text ends with `\n`. A block is a heading line, then a
 * body ("text" below: the text with a `\n` added unless it already ends with
 * one; `(empty)` for the empty string):
 *
 * - `[prior summary]` + text, `[user]` + text, `[assistant]` + text
 * - `[tool call <callId>: <tool>]` + the arguments as compact JSON (a JSON
 *   string argument is parsed and re-serialised; text that does not parse is
 *   shown as it is)
 * - `[tool result <callId>: <status>]` (`, incomplete` appended inside the
 *   brackets when `complete` is false) + the model view text, then, when
 *   present: `[error] <code>: <message>`, `[metadata] <compact JSON>` (only
 *   when it has keys), one `[attachment] <mediaType> "<name>", <n> characters
 *   of data` per attachment (the data itself is not in the text; it is in the
 *   input's items), and per emitted message `[emitted <role> message]` + text.
 */
import type { HistoryItem, ToolResultItem } from './history.js';

/** The body line(s) of a text: terminated, `(empty)` when empty. */
function body(text: string): string {
  if (text === '') return '(empty)\n';
  return text.endsWith('\n') ? text : `${text}\n`;
}

function argumentsText(args: unknown): string {
  if (typeof args !== 'string') return JSON.stringify(args);
  try {
    return JSON.stringify(JSON.parse(args));
  } catch {
    return args;
  }
}

function resultBlock(item: ToolResultItem): string {
  let s = `[tool result ${item.callId}: ${item.status}${item.complete ? '' : ', incomplete'}]\n${body(item.model)}`;
  if (item.error) s += `[error] ${item.error.code}: ${body(item.error.message)}`;
  if (Object.keys(item.metadata).length > 0) s += `[metadata] ${JSON.stringify(item.metadata)}\n`;
  for (const a of item.attachments) {
    const name = a.name === undefined ? '' : ` ${JSON.stringify(a.name)}`;
    s += `[attachment] ${a.mediaType}${name}, ${a.data.length} characters of data\n`;
  }
  for (const m of item.messages) s += `[emitted ${m.role} message]\n${body(m.content)}`;
  return s;
}

/** The block of one item (see the module comment). */
export function renderItem(item: HistoryItem): string {
  switch (item.type) {
    case 'summary':
      return `[prior summary]\n${body(item.content)}`;
    case 'user':
      return `[user]\n${body(item.content)}`;
    case 'assistant':
      return `[assistant]\n${body(item.content)}`;
    case 'tool_call':
      return `[tool call ${item.callId}: ${item.tool}]\n${body(argumentsText(item.args))}`;
    case 'tool_result':
      return resultBlock(item);
  }
}

/** The summarizer input text for `items` (the empty string for no items). */
export function renderHistory(items: readonly HistoryItem[]): string {
  return items.map(renderItem).join('\n');
}
