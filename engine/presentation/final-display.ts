/** The display a call ends with: the tool's own when it stands, else a line for a success or the incomplete-call display. */
import { clipUtf8 } from '../protocol/text.js';
import type { CallStatus, OutputRef } from '../result.js';
import { formatBytes, formatDuration, incompleteDisplay } from './display.js';

/** What the final display is made from. */
export interface FinalDisplayFacts {
  tool: string;
  status: CallStatus;
  durationMs: number;
  /** The tool's own final display, when it stands (see {@link finalDisplay}). */
  toolDisplay?: string | undefined;
  /** Why the call did not succeed: `CODE: message`, or the tool's note. */
  reason: string;
  output: OutputRef | null;
  /** True when the tool wrote output but none of it could be kept. */
  lost: boolean;
  /** What each stream accepted, when the output holds only the prefix that could be stored. */
  accepted?: Array<{ name: string; bytes: number; lines: number }> | undefined;
  /** The call's arguments (their command, for a shell tool, says what the call was doing). */
  args: unknown;
}

/** See the module comment. */
export function finalDisplay(f: FinalDisplayFacts): string {
  if (f.toolDisplay !== undefined) return f.toolDisplay;
  // What the display says was kept is what the output refs hold: nothing published, nothing claimed.
  const streams = keptStreams(f.output);
  if (f.status === 'success') {
    const sizes = streams.map((s) => `${s.name} ${formatBytes(s.bytes)}`).join(', ');
    return `${f.tool} finished in ${formatDuration(f.durationMs)} (${sizes})`;
  }
  return incompleteDisplay({
    tool: f.tool,
    status: f.status,
    durationMs: f.durationMs,
    streams,
    lost: f.lost,
    ...(f.accepted ? { accepted: f.accepted } : {}),
    reason: f.reason,
    summary: summarizeArgs(f.args),
  });
}

/** A final display bounded like the live one: its beginning, and a marker saying how much was elided. */
export function clipDisplay(display: string, maxBytes: number): string {
  const bytes = Buffer.byteLength(display);
  if (bytes <= maxBytes) return display;
  const kept = clipUtf8(display, maxBytes - 64);
  return `${kept}\n[… ${bytes - Buffer.byteLength(kept)} more bytes of display elided]`;
}

/** What a call was doing, in its own words: a shell tool's command, else its arguments as JSON. */
function summarizeArgs(args: unknown): string {
  if (args && typeof args === 'object' && typeof (args as { command?: unknown }).command === 'string') {
    return (args as { command: string }).command;
  }
  try {
    return JSON.stringify(args) ?? '';
  } catch {
    return '';
  }
}

/** The streams an output ref holds, as displays list them (a page, a single output, named streams, or none). */
function keptStreams(output: OutputRef | null): Array<{ name: string; bytes: number; lines: number }> {
  if (output === null) return [];
  if (output.kind === 'streams') return output.streams.map((s) => ({ name: s.name, bytes: s.bytes, lines: s.lines }));
  return [{ name: output.kind === 'page' ? 'page' : 'output', bytes: output.bytes, lines: output.lines }];
}
