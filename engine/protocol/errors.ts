/**
 * Every error sluice raises is a {@link SluiceError} with a stable `code`.
 * Tests and callers branch on codes, never on messages; messages are for people.
 *
 * Errors cross thread boundaries as plain objects ({@link serializeError}) and
 * come back as the same class ({@link deserializeError}), so a code raised in a
 * worker is the code the host sees.
 */

/** The stable error codes. Adding one is a protocol change (see AGENTS.md). */
export const ERROR_CODES = [
  'EBADURI',
  'ENOTFOUND',
  'EINTEGRITY',
  'EUNKNOWNSTREAM',
  'ENOTMANIFEST',
  'ERESOURCELIMIT',
  'EBADDECL',
  'EBADARGS',
  'EBADOPTION',
  'EUNDECLAREDSTREAM',
  'EMIXEDMODE',
  'EBADOUTPUT',
  'EDIGESTMISMATCH',
  'EUNKNOWNTOOL',
  'EBADMODULE',
  'EDENIED',
  'ECANCELLED',
  'ETIMEOUT',
  'EWORKERCRASH',
  'ETOOLFAILED',
  'EDISK',
  'ESIZELIMIT',
  'EBINARY',
  'ECLOSED',
  'ECONTEXTLENGTH',
  'EFITREJECTED',
  'EPROTOCOL',
  'EBADMETHOD',
  'EMISSINGDEP',
  'EUNSUPPORTED',
] as const;

/** One of {@link ERROR_CODES}. */
export type ErrorCode = (typeof ERROR_CODES)[number];

/** Base class of every sluice error. */
export class SluiceError extends Error {
  /** Stable machine-readable code. */
  readonly code: ErrorCode;
  /** Optional structured details (always JSON-serialisable). */
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.details = details;
    this.name = new.target.name;
  }
}

/** A string that is not an exact `artifact://` URI. */
export class BadUriError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EBADURI', message, details);
  }
}
/** A blob, artifact, session or call that does not exist. */
export class NotFoundError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('ENOTFOUND', message, details);
  }
}
/** Stored content whose digest does not match its name. */
export class IntegrityError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EINTEGRITY', message, details);
  }
}
/** A stream name the manifest does not declare. */
export class UnknownStreamError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EUNKNOWNSTREAM', message, details);
  }
}
/** A stream selected on an artifact that is not a manifest. */
export class NotManifestError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('ENOTMANIFEST', message, details);
  }
}
/** A bound was hit: a page over 2 MiB, a model view over its aggregate bound. */
export class ResourceLimitError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('ERESOURCELIMIT', message, details);
  }
}
/** An invalid output declaration or stream name. */
export class BadDeclarationError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EBADDECL', message, details);
  }
}
/** Tool arguments that fail the tool's schema. */
export class BadArgumentsError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EBADARGS', message, details);
  }
}
/** An invalid engine or CLI option. */
export class BadOptionError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EBADOPTION', message, details);
  }
}
/** A chunk for a stream the tool did not declare. */
export class UndeclaredStreamError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EUNDECLAREDSTREAM', message, details);
  }
}
/** A tool that streamed output and then also supplied full output. */
export class MixedModeError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EMIXEDMODE', message, details);
  }
}
/** A full output (`complete.full`) that is not text or bytes. */
export class BadOutputError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EBADOUTPUT', message, details);
  }
}
/** A caller-supplied digest that does not match the content. */
export class DigestMismatchError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EDIGESTMISMATCH', message, details);
  }
}
/** A tool name the registry does not know. */
export class UnknownToolError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EUNKNOWNTOOL', message, details);
  }
}
/** A tool module that cannot be loaded or exports no valid tool. */
export class BadModuleError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EBADMODULE', message, details);
  }
}
/** The host's approval policy refused a prepared operation. */
export class DeniedError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EDENIED', message, details);
  }
}
/** The call was cancelled. */
export class CancelledError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('ECANCELLED', message, details);
  }
}
/** The call ran past its time limit. */
export class TimeoutError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('ETIMEOUT', message, details);
  }
}
/** The worker running the call died (uncaught error, exit, out of memory). */
export class WorkerCrashError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EWORKERCRASH', message, details);
  }
}
/** The tool threw or reported failure. */
export class ToolFailedError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('ETOOLFAILED', message, details);
  }
}
/** A filesystem failure in the store (ENOSPC, EIO, EACCES, ...); `details.errno` has the OS code. */
export class DiskError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EDISK', message, details, options);
  }
}
/** A stream grew past the per-stream size bound. */
export class SizeLimitError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('ESIZELIMIT', message, details);
  }
}
/** A file that is neither text nor a supported media type. */
export class BinaryFileError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EBINARY', message, details);
  }
}
/** The engine or store was used after close. */
export class ClosedError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('ECLOSED', message, details);
  }
}
/** The summarizer's provider rejected the input as too long. */
export class ContextLengthError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('ECONTEXTLENGTH', message, details);
  }
}
/** The host's local fit check rejected the summarizer input. */
export class FitRejectedError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EFITREJECTED', message, details);
  }
}
/** A message across a thread or process boundary that breaks the protocol. */
export class ProtocolError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EPROTOCOL', message, details);
  }
}

/** An HTTP request whose method the route does not accept (405, with `Allow`). */
export class BadMethodError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EBADMETHOD', message, details);
  }
}
/** An optional dependency a feature needs is not installed; the message gives the install command. */
export class MissingDependencyError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EMISSINGDEP', message, details);
  }
}
/** The platform or Node.js version lacks what sluice needs (bash, POSIX process groups, /proc). */
export class UnsupportedPlatformError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('EUNSUPPORTED', message, details);
  }
}

type ErrorClass = new (message: string, details?: Record<string, unknown>) => SluiceError;

const CLASSES: Record<ErrorCode, ErrorClass> = {
  EBADURI: BadUriError,
  ENOTFOUND: NotFoundError,
  EINTEGRITY: IntegrityError,
  EUNKNOWNSTREAM: UnknownStreamError,
  ENOTMANIFEST: NotManifestError,
  ERESOURCELIMIT: ResourceLimitError,
  EBADDECL: BadDeclarationError,
  EBADARGS: BadArgumentsError,
  EBADOPTION: BadOptionError,
  EUNDECLAREDSTREAM: UndeclaredStreamError,
  EMIXEDMODE: MixedModeError,
  EBADOUTPUT: BadOutputError,
  EDIGESTMISMATCH: DigestMismatchError,
  EUNKNOWNTOOL: UnknownToolError,
  EBADMODULE: BadModuleError,
  EDENIED: DeniedError,
  ECANCELLED: CancelledError,
  ETIMEOUT: TimeoutError,
  EWORKERCRASH: WorkerCrashError,
  ETOOLFAILED: ToolFailedError,
  EDISK: DiskError,
  ESIZELIMIT: SizeLimitError,
  EBINARY: BinaryFileError,
  ECLOSED: ClosedError,
  ECONTEXTLENGTH: ContextLengthError,
  EFITREJECTED: FitRejectedError,
  EPROTOCOL: ProtocolError,
  EBADMETHOD: BadMethodError,
  EMISSINGDEP: MissingDependencyError,
  EUNSUPPORTED: UnsupportedPlatformError,
};

/**
 * The plain-object form of an error, as it crosses threads and lands in
 * logs. A tool may send any code in its completion's `error`; the engine
 * reads it with {@link deserializeError}.
 */
export interface SerializedError {
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
}

/** True when `code` is one of sluice's stable codes. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(CLASSES, code);
}

/** Builds the error class for `code`. */
export function makeError(code: ErrorCode, message: string, details?: Record<string, unknown>): SluiceError {
  return new CLASSES[code](message, details);
}

/**
 * Turns anything thrown into a {@link SluiceError}: sluice errors pass through,
 * filesystem errors become {@link DiskError} with their errno, anything else
 * becomes `fallback` with the original message.
 */
export function toSluiceError(err: unknown, fallback: ErrorCode = 'ETOOLFAILED'): SluiceError {
  if (err instanceof SluiceError) return err;
  if (err && typeof err === 'object') {
    const e = err as { code?: unknown; message?: unknown; syscall?: unknown };
    const message = typeof e.message === 'string' ? e.message : String(err);
    if (isErrorCode(e.code)) return makeError(e.code, message);
    if (typeof e.code === 'string' && typeof e.syscall === 'string') {
      return new DiskError(message, { errno: e.code, syscall: e.syscall }, { cause: err });
    }
    // A code of the thrower's own (a tool's `EMINE`) is kept beside the one sluice gives it.
    if (typeof e.code === 'string' && e.code !== '') return makeError(fallback, message, { toolCode: e.code });
    return makeError(fallback, message);
  }
  return makeError(fallback, String(err));
}

/** The plain-object form of `err` (see {@link SerializedError}). */
export function serializeError(err: unknown, fallback: ErrorCode = 'ETOOLFAILED'): SerializedError {
  const e = toSluiceError(err, fallback);
  return e.details === undefined
    ? { code: e.code, message: e.message }
    : { code: e.code, message: e.message, details: e.details };
}

/**
 * Rebuilds the error class from its plain-object form. A code outside
 * {@link ERROR_CODES} (a tool's own, such as `EMINE`) becomes ETOOLFAILED
 * with the original in `details.toolCode`: a tool may name its failures,
 * and that is neither lost nor mistaken for a protocol breach.
 */
export function deserializeError(s: SerializedError): SluiceError {
  if (isErrorCode(s.code)) return makeError(s.code, s.message, s.details);
  return new ToolFailedError(s.message, { ...s.details, toolCode: s.code });
}
