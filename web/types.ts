/**
 * The shapes of the API the page reads, as far as it reads them (the full
 * definitions are the wire schemas, docs/schema/openapi.json).
 */

/** Bytes and lines of one stream. */
export interface StreamProgress {
  name: string;
  bytes: number;
  lines: number;
}

/** CallSummary: one call of GET /v1/calls and GET /v1/events. */
export interface CallSummary {
  callId: string;
  tool: string;
  session?: string;
  status: 'running' | 'success' | 'failed' | 'cancelled';
  complete: boolean | null;
  startedAt: string;
  durationMs: number | null;
  streams: StreamProgress[];
  version: number;
}

/** StreamRef and OutputRef of a terminal result. */
export type OutputRef =
  | { kind: 'single'; digest: string; bytes: number; lines: number; truncated: boolean }
  | {
      kind: 'streams';
      manifest: string;
      streams: Array<{ name: string; digest: string; bytes: number; lines: number; truncated: boolean }>;
    }
  | { kind: 'page'; bytes: number; lines: number };

/** TerminalResult. */
export interface TerminalResult {
  callId: string;
  tool: string;
  session?: string;
  status: 'success' | 'failed' | 'cancelled';
  complete: boolean;
  display: string;
  model: string;
  output: OutputRef | null;
  error?: { code: string; message: string };
  startedAt: string;
  durationMs: number;
  /** The policy the call's processes ran under; absent: unconfined. */
  sandbox?: SandboxPolicy;
}

/** SandboxPolicy. */
export interface SandboxPolicy {
  filesystem: 'read-only' | 'workspace-write';
  workspace: string;
  network: 'on' | 'off';
  writable: string[];
  hidden: string[];
  env: string[];
  limits?: {
    memoryBytes?: number;
    cpuSeconds?: number;
    processes?: number;
    fileSizeBytes?: number;
    openFiles?: number;
  };
}

/** ReadPage. */
export interface ReadPage {
  content: string;
  offset: number;
  lines: number;
  totalLines: number;
  nextOffset: number | null;
  nextByteOffset: number | null;
  lossy: boolean;
}

/** SearchResult. */
export interface SearchResult {
  lines: Array<{ line: number; text: string; match: boolean; cut?: number }>;
  matches: number;
  offset: number;
  totalLines: number;
  nextOffset: number | null;
  longLines: number;
}

/** SessionSummary. */
export interface SessionSummary {
  id: string;
  calls: number;
  reverted: number;
  interrupted: number;
  corruptLines: number;
  bytes: number;
  referencedBytes: number;
  updatedAt: string;
}

/** ReplayedSession. */
export interface ReplayedSession {
  session: string;
  reverted: number;
  corruptLines: number;
  skippedLines: number;
  calls: Array<{ callId: string; tool: string; args: unknown; result: TerminalResult; interrupted: boolean }>;
}

/** StatsResponse. */
export interface Stats {
  callsStarted: number;
  callsEnded: number;
  capturedBytes: number;
  running: number;
  at: string;
}

/** StoreResponse. */
export interface StoreInfo {
  root: string;
  blobs: number;
  bytes: number;
  walkedAt: string;
  lastGc: { at: string; report: Record<string, number | boolean> } | null;
  lastVerify: { at: string; report: Record<string, unknown> } | null;
}
