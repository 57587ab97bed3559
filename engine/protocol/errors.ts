/** Every sluice error is a {@link SluiceError} with a stable `code` (callers branch on codes), the same class on both sides of a thread boundary. */

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
  'ELIMIT',
  'EQUEUEFULL',
] as const;

/** One of {@link ERROR_CODES}. */
export type ErrorCode = (typeof ERROR_CODES)[number];

/** The brand every sluice error carries, registered globally, so `instanceof` works across two copies of the package. */
const BRAND = Symbol.for('sluice.error');

/** The code each error class stands for (filled in below, with the classes). */
const CODE_OF = new Map<unknown, ErrorCode>();

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
Object.defineProperty(SluiceError.prototype, BRAND, { value: true });
/** `instanceof` checks the brand and the code, so it holds across copies of the package; subclasses a user writes keep the prototype check. */
Object.defineProperty(SluiceError, Symbol.hasInstance, {
  value: function hasInstance(this: abstract new (...args: never[]) => unknown, value: unknown): boolean {
    if (typeof value !== 'object' || value === null || (value as { [BRAND]?: unknown })[BRAND] !== true) return false;
    const code = CODE_OF.get(this);
    if (code !== undefined) return (value as { code?: unknown }).code === code;
    return this === SluiceError || Function.prototype[Symbol.hasInstance].call(this, value);
  },
});

/** A string that is not an exact `artifact://` URI. */
export class BadUriError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EBADURI', message, details, options);
  }
}
/** A blob, artifact, session or call that does not exist. */
export class NotFoundError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('ENOTFOUND', message, details, options);
  }
}
/** Stored content whose digest does not match its name. */
export class IntegrityError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EINTEGRITY', message, details, options);
  }
}
/** A stream name the manifest does not declare. */
export class UnknownStreamError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EUNKNOWNSTREAM', message, details, options);
  }
}
/** A stream selected on an artifact that is not a manifest. */
export class NotManifestError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('ENOTMANIFEST', message, details, options);
  }
}
/** A bound was hit: a page past its size, a model view over its aggregate bound. */
export class ResourceLimitError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('ERESOURCELIMIT', message, details, options);
  }
}
/** An invalid output declaration or stream name. */
export class BadDeclarationError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EBADDECL', message, details, options);
  }
}
/** Tool arguments that fail the tool's schema. */
export class BadArgumentsError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EBADARGS', message, details, options);
  }
}
/** An invalid engine or CLI option. */
export class BadOptionError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EBADOPTION', message, details, options);
  }
}
/** A chunk for a stream the tool did not declare. */
export class UndeclaredStreamError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EUNDECLAREDSTREAM', message, details, options);
  }
}
/** A tool that streamed output and then also supplied full output. */
export class MixedModeError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EMIXEDMODE', message, details, options);
  }
}
/** A full output (`complete.full`) that is not text or bytes. */
export class BadOutputError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EBADOUTPUT', message, details, options);
  }
}
/** A caller-supplied digest that does not match the content. */
export class DigestMismatchError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EDIGESTMISMATCH', message, details, options);
  }
}
/** A tool name the registry does not know. */
export class UnknownToolError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EUNKNOWNTOOL', message, details, options);
  }
}
/** A tool module that cannot be loaded or exports no valid tool. */
export class BadModuleError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EBADMODULE', message, details, options);
  }
}
/** The host's approval policy refused a prepared operation. */
export class DeniedError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EDENIED', message, details, options);
  }
}
/** The call was cancelled. */
export class CancelledError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('ECANCELLED', message, details, options);
  }
}
/** The call ran past its time limit. */
export class TimeoutError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('ETIMEOUT', message, details, options);
  }
}
/** The worker running the call died (uncaught error, exit, out of memory). */
export class WorkerCrashError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EWORKERCRASH', message, details, options);
  }
}
/** The tool threw or reported failure. */
export class ToolFailedError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('ETOOLFAILED', message, details, options);
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
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('ESIZELIMIT', message, details, options);
  }
}
/** A file that is neither text nor a supported media type. */
export class BinaryFileError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EBINARY', message, details, options);
  }
}
/** The engine or store was used after close. */
export class ClosedError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('ECLOSED', message, details, options);
  }
}
/** The summarizer's provider rejected the input as too long. */
export class ContextLengthError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('ECONTEXTLENGTH', message, details, options);
  }
}
/** The host's local fit check rejected the summarizer input. */
export class FitRejectedError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EFITREJECTED', message, details, options);
  }
}
/** A message across a thread or process boundary that breaks the protocol. */
export class ProtocolError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EPROTOCOL', message, details, options);
  }
}

/** An HTTP request whose method the route does not accept (405, with `Allow`). */
export class BadMethodError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EBADMETHOD', message, details, options);
  }
}
/** An optional dependency a feature needs is not installed; the message gives the install command. */
export class MissingDependencyError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EMISSINGDEP', message, details, options);
  }
}
/** The platform or Node.js version lacks what sluice needs (bash, POSIX process groups, /proc). */
export class UnsupportedPlatformError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EUNSUPPORTED', message, details, options);
  }
}

/**
 * A sandboxed call passed one of its resource limits and was ended
 * (`details.limit`: `memory`, `cpu`, `processes`, `fileSize` or
 * `openFiles`; `details.value`: the limit). The output written before is kept.
 */
export class LimitExceededError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('ELIMIT', message, details, options);
  }
}

/**
 * A farm queue (engine/farm/) holds as many items as its bound allows and
 * refused one more (`details.maxDepth`). Retryable: nothing already queued
 * was lost, and the submission succeeds once workers have taken some.
 */
export class QueueFullError extends SluiceError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('EQUEUEFULL', message, details, options);
  }
}

type ErrorClass = new (message: string, details?: Record<string, unknown>, options?: ErrorOptions) => SluiceError;

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
  ELIMIT: LimitExceededError,
  EQUEUEFULL: QueueFullError,
};
for (const [code, cls] of Object.entries(CLASSES)) CODE_OF.set(cls, code as ErrorCode);

/** The plain-object form of an error, as it crosses threads and lands in logs. */
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
export function makeError(
  code: ErrorCode,
  message: string,
  details?: Record<string, unknown>,
  options?: ErrorOptions,
): SluiceError {
  return new CLASSES[code](message, details, options);
}

/** System calls whose failures are the network's: `getaddrinfo ENOTFOUND` is neither a missing artifact nor EDISK. */
const NETWORK_SYSCALL = /^(getaddrinfo|getnameinfo|query[A-Za-z]*|connect|bind|listen|accept|send|recv|shutdown)$/;

/**
 * Turns anything thrown into a {@link SluiceError}, keeping it as `cause`.
 * An OS error (it has a `syscall`) becomes DiskError, or `fallback` for the
 * network's, whatever its `code`; a sluice code is kept; any other code is
 * kept as `details.toolCode` beside `fallback`.
 */
export function toSluiceError(err: unknown, fallback: ErrorCode = 'ETOOLFAILED'): SluiceError {
  if (err instanceof SluiceError) return err;
  if (err && typeof err === 'object') {
    const e = err as { code?: unknown; message?: unknown; syscall?: unknown };
    const message = typeof e.message === 'string' ? e.message : String(err);
    const cause = { cause: err };
    if (typeof e.code === 'string' && typeof e.syscall === 'string') {
      const details = { errno: e.code, syscall: e.syscall };
      if (NETWORK_SYSCALL.test(e.syscall)) return makeError(fallback, message, details, cause);
      return new DiskError(message, details, cause);
    }
    if (isErrorCode(e.code)) return makeError(e.code, message, undefined, cause);
    if (typeof e.code === 'string' && e.code !== '') return makeError(fallback, message, { toolCode: e.code }, cause);
    return makeError(fallback, message, undefined, cause);
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
 * {@link ERROR_CODES} (a tool's own) becomes ETOOLFAILED with the original
 * in `details.toolCode`: neither lost nor mistaken for a protocol breach.
 */
export function deserializeError(s: SerializedError): SluiceError {
  if (isErrorCode(s.code)) return makeError(s.code, s.message, s.details);
  return new ToolFailedError(s.message, { ...s.details, toolCode: s.code });
}
