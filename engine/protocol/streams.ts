/** Output declarations and stream names: one validator for registration and URI lookup, so a name that can be declared is exactly one that can be addressed. */
import { BadDeclarationError } from './errors.js';

/** At most this many UTF-8 bytes in a stream name. */
export const MAX_STREAM_NAME_BYTES = 64;
/** At most this many streams in one declaration. */
export const MAX_STREAMS = 16;

const NAME_CHARS = /^[A-Za-z0-9._-]+$/;

/** Why `name` is not a valid stream name, or undefined when it is. */
export function streamNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string') return 'stream name must be a string';
  if (name.length === 0) return 'stream name is empty';
  if (name.length > MAX_STREAM_NAME_BYTES) {
    return `stream name ${JSON.stringify(name.slice(0, 80))} is longer than ${MAX_STREAM_NAME_BYTES} bytes`;
  }
  if (name === '.' || name === '..') return `stream name ${JSON.stringify(name)} is a traversal name`;
  if (!NAME_CHARS.test(name)) {
    return `stream name ${JSON.stringify(name)} may only contain A-Z a-z 0-9 . _ - (no separators, spaces or control characters)`;
  }
  return undefined;
}

/** True when `name` is a valid stream name. */
export function isStreamName(name: unknown): name is string {
  return streamNameProblem(name) === undefined;
}

/** A tool's output declaration: one unnamed output, or named streams in model rendering order. */
export type OutputDeclaration = { kind: 'single' } | { kind: 'streams'; streams: readonly string[] };

/** Validates an output declaration and returns a normalised copy; BadDeclarationError naming the problem. */
export function validateDeclaration(decl: unknown, owner = 'tool'): OutputDeclaration {
  if (decl === undefined || decl === 'single') return { kind: 'single' };
  if (Array.isArray(decl)) return validateDeclaration({ kind: 'streams', streams: decl }, owner);
  if (!decl || typeof decl !== 'object') {
    throw new BadDeclarationError(
      `${owner}: output declaration must be 'single', a list of stream names or { kind, streams }`,
    );
  }
  const d = decl as { kind?: unknown; streams?: unknown };
  if (d.kind === 'single') {
    if (d.streams !== undefined) throw new BadDeclarationError(`${owner}: single output declares no streams`);
    return { kind: 'single' };
  }
  if (d.kind !== 'streams') {
    throw new BadDeclarationError(`${owner}: output kind must be 'single' or 'streams', got ${JSON.stringify(d.kind)}`);
  }
  if (!Array.isArray(d.streams)) throw new BadDeclarationError(`${owner}: streams must be a list of names`);
  if (d.streams.length === 0)
    throw new BadDeclarationError(`${owner}: a streams declaration needs at least one stream`);
  if (d.streams.length > MAX_STREAMS) {
    throw new BadDeclarationError(`${owner}: ${d.streams.length} streams declared, at most ${MAX_STREAMS} allowed`, {
      count: d.streams.length,
    });
  }
  const seen = new Set<string>();
  for (const name of d.streams) {
    const problem = streamNameProblem(name);
    if (problem) throw new BadDeclarationError(`${owner}: ${problem}`, { stream: String(name) });
    if (seen.has(name))
      throw new BadDeclarationError(`${owner}: stream ${JSON.stringify(name)} is declared twice`, { stream: name });
    seen.add(name);
  }
  return { kind: 'streams', streams: [...seen] };
}

/** The stream names of a declaration: `['']` for single output (the unnamed stream). */
export function streamNames(decl: OutputDeclaration): readonly string[] {
  return decl.kind === 'single' ? [''] : decl.streams;
}

/** How a truncated stream is previewed for the model: its first lines, or its first and last lines. */
export type PreviewMode = 'head' | 'head+tail';

/** The preview modes, for validation and help texts. */
export const PREVIEW_MODES: readonly PreviewMode[] = ['head', 'head+tail'];
