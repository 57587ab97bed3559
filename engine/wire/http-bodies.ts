/** The bodies of the HTTP API (docs/http.md) as zod schemas, part of the wire contract. */

import { sandboxSpecSchema } from '../protocol/sandbox.js';
import { z } from '../protocol/zod.js';
import {
  callStatusSchema,
  errorCodeSchema,
  outputDeclarationSchema,
  PROTOCOL_VERSION,
  previewModeSchema,
  terminalResultSchema,
  toolIsolationSchema,
} from './shapes.js';

/** A query value of decimal digits (parsed to a count by the route). */
const decimal = z
  .string()
  .regex(/^[0-9]{1,15}$/)
  .optional();
/** A query value `true` or `false`. */
const flag = z.enum(['true', 'false']).optional();
const count = z.number().int().nonnegative();
const isoTime = z.string();
/** `POST /v1/calls` request body. */
export const callRequestSchema = z.strictObject({
  tool: z.string().min(1).max(256),
  args: z.unknown().default({}),
  session: z.string().min(1).optional(),
  timeoutMs: z.number().int().positive().optional(),
  preview: previewModeSchema.optional(),
  sandbox: sandboxSpecSchema.optional(),
});

/** `POST /v1/calls` response (202). */
export const callAcceptedSchema = z.object({ callId: z.string() });

/** `GET /v1/calls/:id` while the call runs (202). */
export const callPendingSchema = z.object({
  callId: z.string(),
  tool: z.string(),
  session: z.string().optional(),
  status: z.literal('running'),
  startedAt: isoTime,
});

/** `POST /v1/calls/:id/cancel` request body (optional). */
export const cancelRequestSchema = z.strictObject({ reason: z.string().max(1000).optional() });

/** `POST /v1/calls/:id/cancel` response: 202 `cancelling` while it runs, 200 with the terminal status once ended. */
export const cancelResponseSchema = z.object({
  callId: z.string(),
  status: z.union([z.literal('cancelling'), callStatusSchema]),
});

/** `GET /v1/search` query: the strings of `Engine.search`'s arguments. */
export const searchQuerySchema = z.strictObject({
  filePath: z.string().min(1),
  pattern: z.string().min(1),
  regex: flag,
  ignoreCase: flag,
  context: decimal,
  limit: decimal,
  offset: decimal,
});

/** `GET /v1/read` query parameters (decimal strings). */
export const readQuerySchema = z.strictObject({
  filePath: z.string().min(1),
  offset: decimal,
  limit: decimal,
  byteOffset: decimal,
});

/** The body of every error response except 401 (which has none). */
export const errorBodySchema = z.object({ error: z.object({ code: errorCodeSchema, message: z.string() }) });

/** One tool in `GET /v1/tools`. */
export const toolSummarySchema = z.object({
  name: z.string(),
  description: z.string(),
  source: z.enum(['builtin', 'plugin', 'mcp']),
  output: outputDeclarationSchema,
  selfPaginating: z.boolean(),
  isolation: toolIsolationSchema,
  preview: previewModeSchema.optional(),
  argsSchema: z.unknown(),
});

/** `GET /v1/tools` response. */
export const toolsResponseSchema = z.object({ tools: z.array(toolSummarySchema) });

/** One session in `GET /v1/sessions`. */
export const sessionSummarySchema = z.object({
  id: z.string(),
  calls: count,
  reverted: count,
  interrupted: count,
  corruptLines: count,
  bytes: count,
  referencedBytes: count,
  updatedAt: isoTime,
});

/** `GET /v1/sessions` response. */
export const sessionsResponseSchema = z.object({ sessions: z.array(sessionSummarySchema) });

/** One call of `GET /v1/sessions/:id/replay`. */
export const replayedCallSchema = z.object({
  callId: z.string(),
  tool: z.string(),
  args: z.unknown(),
  result: terminalResultSchema,
  interrupted: z.boolean(),
  unavailable: z.array(z.string()).optional(),
});

/** `GET /v1/sessions/:id/replay` response. */
export const replayedSessionSchema = z.object({
  session: z.string(),
  calls: z.array(replayedCallSchema),
  reverted: count,
  corruptLines: count,
  skippedLines: count,
});

/** `GET /v1/info` response. */
export const infoResponseSchema = z.object({
  name: z.literal('sluice'),
  version: z.string(),
  protocolVersion: z.literal(PROTOCOL_VERSION),
});
