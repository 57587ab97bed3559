/** The `toolOutput` engine options: per-stream preview limits and the aggregate bound on the model view. */
import { BadOptionError } from '../protocol/errors.js';
import { quoteValue } from '../protocol/issues.js';
import { MAX_STREAMS } from '../protocol/streams.js';
import { z } from '../protocol/zod.js';
import { PREVIEW_MODES, type PreviewMode } from './head-tail.js';
import { minModelViewBytes } from './model-view.js';

/** Default {@link ToolOutputOptions.maxLines}. */
export const DEFAULT_MAX_LINES = 2000;
/** Default {@link ToolOutputOptions.maxBytes}. */
export const DEFAULT_MAX_BYTES = 51200;
/** Default {@link ToolOutputOptions.tailShare}: head and tail get half each. */
export const DEFAULT_TAIL_SHARE = 0.5;
/** Default {@link ToolOutputOptions.maxModelBytes}. */
export const DEFAULT_MAX_MODEL_BYTES = 256 * 1024;
/** Bytes of the model-view bound kept for the status line of a failed or cancelled call. */
export const MODEL_STATUS_RESERVE = 1024;

/** The least {@link ToolOutputOptions.maxModelBytes} with `maxLines`: room for 16 streams' headings, hints, smallest previews and the status line. */
export function minModelBytes(maxLines: number): number {
  return minModelViewBytes(MAX_STREAMS, maxLines) + MODEL_STATUS_RESERVE;
}

/** Validated `toolOutput` options. */
export interface ToolOutputOptions {
  /** Lines of each stream's preview. @default 2000 */
  maxLines: number;
  /** UTF-8 bytes of each stream's preview, before the aggregate bound may lower it. @default 51200 */
  maxBytes: number;
  /** Hard bound in UTF-8 bytes on one call's rendered model view; stream limits are lowered to fit it. @default 262144 */
  maxModelBytes: number;
  /** `head` or `head+tail`, for tools that declare no preview; a call's `preview` overrides both. @default 'head' */
  preview?: PreviewMode;
  /** With `head+tail`: the tail's share of each stream's limits, above 0 and below 1. @default 0.5 */
  tailShare: number;
}

/** What a caller may pass: any subset; missing fields take their defaults. */
export type ToolOutputOptionsInput = Partial<ToolOutputOptions>;

const KNOWN = 'maxLines, maxBytes, maxModelBytes, preview, tailShare';

const positiveInt = z.number().int().positive();

/** The zod schema of the `toolOutput` options (strict: unknown keys are rejected). */
export const toolOutputOptionsSchema = z.strictObject({
  maxLines: positiveInt.default(DEFAULT_MAX_LINES),
  maxBytes: positiveInt.default(DEFAULT_MAX_BYTES),
  maxModelBytes: positiveInt.default(DEFAULT_MAX_MODEL_BYTES),
  preview: z.enum(PREVIEW_MODES as [PreviewMode, ...PreviewMode[]]).optional(),
  tailShare: z.number().gt(0).lt(1).default(DEFAULT_TAIL_SHARE),
});

/** The defaults, validated. */
export const DEFAULT_TOOL_OUTPUT_OPTIONS: Readonly<ToolOutputOptions> = Object.freeze({
  maxLines: DEFAULT_MAX_LINES,
  maxBytes: DEFAULT_MAX_BYTES,
  maxModelBytes: DEFAULT_MAX_MODEL_BYTES,
  tailShare: DEFAULT_TAIL_SHARE,
});

/** Validates `toolOutput` options (`undefined`: all defaults) and fills in defaults; EBADOPTION naming the option and quoting the value. */
export function parseToolOutputOptions(input: unknown, path = 'toolOutput'): ToolOutputOptions {
  if (input === undefined) return { ...DEFAULT_TOOL_OUTPUT_OPTIONS };
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new BadOptionError(`${path} must be an object, got ${quoteValue(input)}`, { option: path });
  }
  const result = toolOutputOptionsSchema.safeParse(input);
  if (!result.success) {
    const issue = result.error.issues[0];
    if (issue?.code === 'unrecognized_keys') {
      const key = issue.keys[0] ?? '';
      throw new BadOptionError(`${path}.${key} is not an option (known: ${KNOWN})`, {
        option: `${path}.${key}`,
      });
    }
    const key = String(issue?.path[0] ?? '');
    const value = (input as Record<string, unknown>)[key];
    const want =
      key === 'preview'
        ? `one of ${PREVIEW_MODES.map((m) => JSON.stringify(m)).join(', ')}`
        : key === 'tailShare'
          ? 'a number above 0 and below 1'
          : 'a positive integer';
    throw new BadOptionError(`${path}.${key} must be ${want}, got ${quoteValue(value)}`, {
      option: `${path}.${key}`,
      value: quoteValue(value),
    });
  }
  const opts = result.data;
  const min = minModelBytes(opts.maxLines);
  if (opts.maxModelBytes < min) {
    throw new BadOptionError(
      `${path}.maxModelBytes must be at least ${min} with maxLines ${opts.maxLines} (room for the headings and read hints of ${MAX_STREAMS} streams and a status line), got ${opts.maxModelBytes}`,
      { option: `${path}.maxModelBytes`, value: String(opts.maxModelBytes), minimum: min },
    );
  }
  return opts;
}
