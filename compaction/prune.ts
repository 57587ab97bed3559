/**
 * The private retry snapshot: the input of compaction's single pruned retry.
 *
 * A deep copy of the active history in which no tool result keeps its output
 * text, whatever its size or recency (the recent suffix included: the
 * snapshot is only summarizer input; the context kept after the summary is
 * the caller's own, untouched items):
 *
 * - an artifact read (see artifact-read.ts) loses all of its output: model
 *   text, output reference, error, metadata, attachments and emitted
 *   messages; its model text becomes exactly {@link ARTIFACT_READ_OMITTED}.
 *   Another copy of artifact content is never kept, and the marker is only
 *   text in this snapshot: this module has no store to write it to.
 * - any other result with stored output gets read references instead of its
 *   text: `read(filePath="artifact://<digest>")` for single output, one
 *   `read(filePath="artifact://<manifest>/<stream>")` per stream, in order.
 * - any other result without stored output (a self-paginating page such as a
 *   filesystem read, or nothing stored) gets a marker that says so: there is
 *   no artifact to point at, and keeping some of its text would make the
 *   retry's size depend on it again. Its call, with the arguments to repeat
 *   it, stays in the snapshot.
 *
 * Ordinary results keep their status, error, metadata, attachments and
 * emitted messages. Every item keeps its place, type and call id, so calls
 * and results stay paired.
 */

import type { OutputRef } from '../engine/result.js';
import { formatArtifactUri } from '../store/uri.js';
import { artifactReadTarget } from './artifact-read.js';
import type { HistoryItem, ToolCallItem, ToolResultItem } from './history.js';
import { cloneJson, type JsonObject } from './json.js';

/** The whole model text of an artifact read in the pruned retry snapshot. */
export const ARTIFACT_READ_OMITTED = '[artifact read output omitted for compaction]';

function plural(n: number, unit: string): string {
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

function size(bytes: number, lines: number): string {
  return `${plural(bytes, 'byte')}, ${plural(lines, 'line')}`;
}

/** `read(filePath="<uri>")`: the public way back to stored output. */
export function readCall(uri: string): string {
  return `read(filePath="${uri}")`;
}

/**
 * The text that replaces an ordinary result's model view in the retry
 * snapshot (no trailing newline). `modelBytes` is the size of the replaced
 * text, reported when there is no stored output to point at.
 */
export function outputReferenceText(output: OutputRef | null, modelBytes: number): string {
  if (output === null) {
    return `[Output omitted for compaction (${plural(modelBytes, 'byte')} of model text); no artifact was stored for it]`;
  }
  switch (output.kind) {
    case 'single':
      return `[Output omitted for compaction. Stored output (${size(output.bytes, output.lines)}): ${readCall(
        formatArtifactUri(output.digest),
      )}]`;
    case 'streams':
      return output.streams
        .map(
          (s) =>
            `[${s.name}]\n[Output omitted for compaction. Stored stream (${size(s.bytes, s.lines)}): ${readCall(
              formatArtifactUri(output.manifest, s.name),
            )}]`,
        )
        .join('\n\n');
    case 'page':
      return `[Page output omitted for compaction (${size(output.bytes, output.lines)}); it was not stored as an artifact]`;
  }
}

function copyItem(item: HistoryItem): HistoryItem {
  switch (item.type) {
    case 'user':
    case 'assistant':
    case 'summary':
      return { type: item.type, content: item.content };
    case 'tool_call':
      return {
        type: 'tool_call',
        callId: item.callId,
        tool: item.tool,
        args: typeof item.args === 'string' ? item.args : cloneJson(item.args),
      };
    case 'tool_result':
      return copyResult(item);
  }
}

function copyResult(item: ToolResultItem): ToolResultItem {
  const copy: ToolResultItem = {
    type: 'tool_result',
    callId: item.callId,
    status: item.status,
    complete: item.complete,
    model: item.model,
    output: item.output === null ? null : (cloneJson(item.output as never) as OutputRef),
    metadata: cloneJson(item.metadata),
    attachments: item.attachments.map((a) =>
      a.name === undefined
        ? { mediaType: a.mediaType, data: a.data }
        : { mediaType: a.mediaType, data: a.data, name: a.name },
    ),
    messages: item.messages.map((m) => ({ role: m.role, content: m.content })),
  };
  if (item.error) {
    const { code, message, details } = item.error;
    copy.error =
      details === undefined ? { code, message } : { code, message, details: cloneJson(details as JsonObject) };
  }
  return copy;
}

/**
 * A deep copy of validated history items: only the known fields, nothing
 * shared with the input. The first trial's items are this copy, so nothing a
 * summarizer does to its input reaches the caller's history.
 */
export function copyHistory(items: readonly HistoryItem[]): HistoryItem[] {
  return items.map(copyItem);
}

/** The snapshot item of an artifact read's result: the marker and nothing else of its output. */
function omittedArtifactRead(item: ToolResultItem): ToolResultItem {
  return {
    type: 'tool_result',
    callId: item.callId,
    status: item.status,
    complete: item.complete,
    model: ARTIFACT_READ_OMITTED,
    output: null,
    metadata: {},
    attachments: [],
    messages: [],
  };
}

/**
 * The private retry snapshot of `items` (see the module comment). Pure: reads
 * `items` and returns new objects; the input is never modified.
 */
export function pruneForRetry(items: readonly HistoryItem[]): HistoryItem[] {
  const calls = new Map<string, ToolCallItem>();
  for (const item of items) {
    if (item.type === 'tool_call' && !calls.has(item.callId)) calls.set(item.callId, item);
  }
  return items.map((item) => {
    if (item.type !== 'tool_result') return copyItem(item);
    const call = calls.get(item.callId);
    if (call !== undefined && artifactReadTarget(call) !== undefined) return omittedArtifactRead(item);
    const copy = copyResult(item);
    copy.model = outputReferenceText(item.output, Buffer.byteLength(item.model, 'utf8'));
    return copy;
  });
}
