/**
 * Builders for model histories and a scripted summarizer that records every
 * input it receives, for the compaction tests.
 */
import { createHash } from 'node:crypto';
import type { JsonObject } from '../../compaction/json.js';
import type {
  AssistantItem,
  OutputRef,
  SummarizerInput,
  SummaryItem,
  ToolCallItem,
  ToolResultItem,
  UserItem,
} from '../../engine/index.js';

/** SHA-256 hex of `s`. */
export const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

/** Line count by the project's rule (a final `\n` ends the last line). */
export function linesOf(s: string): number {
  if (s === '') return 0;
  const n = s.split('\n').length - 1;
  return s.endsWith('\n') ? n : n + 1;
}

export const user = (content: string): UserItem => ({ type: 'user', content });
export const assistant = (content: string): AssistantItem => ({ type: 'assistant', content });
export const summary = (content: string): SummaryItem => ({ type: 'summary', content });
export const call = (callId: string, tool: string, args: JsonObject | string): ToolCallItem => ({
  type: 'tool_call',
  callId,
  tool,
  args,
});

/** A tool result; everything not given is a successful, complete result with no output. */
export function result(callId: string, fields: Partial<Omit<ToolResultItem, 'type' | 'callId'>> = {}): ToolResultItem {
  return {
    type: 'tool_result',
    callId,
    status: 'success',
    complete: true,
    model: '',
    output: null,
    metadata: {},
    attachments: [],
    messages: [],
    ...fields,
  };
}

/** A single-output reference for `content` (digest of the content). */
export function singleRef(content: string, truncated = false): OutputRef {
  return {
    kind: 'single',
    digest: sha(content),
    bytes: Buffer.byteLength(content),
    lines: linesOf(content),
    truncated,
  };
}

/** A named-streams reference; the manifest digest is derived from the stream digests. */
export function streamsRef(streams: Array<[name: string, content: string]>): OutputRef {
  const refs = streams.map(([name, content]) => ({
    name,
    digest: sha(content),
    bytes: Buffer.byteLength(content),
    lines: linesOf(content),
    truncated: false,
  }));
  return { kind: 'streams', manifest: sha(JSON.stringify(refs)), streams: refs };
}

/** A page reference (self-paginating tools store nothing). */
export function pageRef(content: string): OutputRef {
  return { kind: 'page', bytes: Buffer.byteLength(content), lines: linesOf(content) };
}

/** What one scripted trial does: return this value, throw this error, or run this function. */
export type Step =
  | { returns: unknown }
  | { throws: unknown }
  | { run: (input: SummarizerInput) => Promise<string> | string };

/**
 * A summarizer that plays `steps` in order and records every input. A call
 * past the script fails the test loudly (a third trial would be a bug).
 */
export function scripted(...steps: Step[]): {
  summarizer: (input: SummarizerInput) => Promise<string>;
  inputs: SummarizerInput[];
} {
  const inputs: SummarizerInput[] = [];
  const summarizer = async (input: SummarizerInput): Promise<string> => {
    inputs.push(input);
    const step = steps[inputs.length - 1];
    if (step === undefined) throw new Error(`summarizer called ${inputs.length} times, script has ${steps.length}`);
    if ('throws' in step) throw step.throws;
    if ('run' in step) return step.run(input);
    return step.returns as string;
  };
  return { summarizer, inputs };
}

/** A fit check that answers from a script and records its inputs. */
export function scriptedFit(...answers: Array<boolean | { throws: unknown }>): {
  fitCheck: (input: SummarizerInput) => Promise<boolean>;
  inputs: SummarizerInput[];
} {
  const inputs: SummarizerInput[] = [];
  const fitCheck = async (input: SummarizerInput): Promise<boolean> => {
    inputs.push(input);
    const a = answers[inputs.length - 1];
    if (a === undefined) throw new Error(`fit check called ${inputs.length} times, script has ${answers.length}`);
    if (typeof a === 'object') throw a.throws;
    return a;
  };
  return { fitCheck, inputs };
}

/** A read hint's URIs, in order, from a rendered text. */
export function readUris(text: string): string[] {
  return [...text.matchAll(/read\(filePath="([^"]*)"\)/g)].map((m) => m[1] as string);
}
