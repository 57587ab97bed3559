/**
 * Finding newlines with WebAssembly SIMD for the line scanner, which runs on
 * the main thread for every captured byte (docs/benchmarks.md, "Line
 * counting"). The module is assembled below, so the build needs no wasm
 * toolchain. `nth(from, to, k)` returns the offset of the `k`-th newline in
 * `[from, to)`, or `-1 - count` when there are fewer. Callers copy bytes into
 * the module's own memory, so nothing outside can change them mid-count.
 */

/** The SIMD newline finder, or undefined where WebAssembly SIMD is not available. */
export interface NewlineFinder {
  /** The module's memory, at least {@link NewlineFinder.capacity} bytes from offset 0. */
  readonly bytes: Uint8Array;
  /** Most bytes one call looks at. */
  readonly capacity: number;
  /** See the module comment. */
  nth(from: number, to: number, k: number): number;
}

/** Bytes of module memory: 4 pages, 256 KiB, the largest chunk a worker sends (MAX_CHUNK_BYTES). */
const PAGES = 4;

// Opcodes (WebAssembly core spec 2.0, with the fixed-width SIMD instructions).
const BLOCK = 0x02;
const LOOP = 0x03;
const IF = 0x04;
const END = 0x0b;
const BR = 0x0c;
const BR_IF = 0x0d;
const RETURN = 0x0f;
const VOID = 0x40;
const LOCAL_GET = 0x20;
const LOCAL_SET = 0x21;
const LOCAL_TEE = 0x22;
const I32_LOAD8_U = 0x2d;
const I32_CONST = 0x41;
const I32_EQ = 0x46;
const I32_GT_U = 0x4b;
const I32_GE_U = 0x4f;
const I32_CTZ = 0x68;
const I32_POPCNT = 0x69;
const I32_ADD = 0x6a;
const I32_SUB = 0x6b;
const I32_AND = 0x71;
const SIMD = 0xfd;
const V128_LOAD = 0x00;
const V128_CONST = 0x0c;
const I8X16_SPLAT = 0x0f;
const I32X4_EXTRACT_LANE = 0x1b;
const I8X16_EQ = 0x23;
const I8X16_BITMASK = 0x64;
const I8X16_SUB = 0x71;
const I16X8_EXTADD_PAIRWISE_I8X16_U = 0x7d;
const I32X4_EXTADD_PAIRWISE_I16X8_U = 0x7f;
const I32 = 0x7f;
const V128 = 0x7b;

// Locals: the three parameters, then the function's own.
const FROM = 0; // doubles as the cursor
const TO = 1;
const K = 2;
const COUNT = 3;
const MASK = 4;
const N = 5;
const NL = 6; // v128: sixteen newlines
const ACC = 7; // v128: per lane, the newlines seen in a stride

/** Unsigned LEB128. */
function leb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

/** Signed LEB128 of a small integer. */
function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) {
      out.push(b);
      return out;
    }
    out.push(b | 0x80);
  }
}

const get = (l: number) => [LOCAL_GET, l];
const set = (l: number) => [LOCAL_SET, l];
const i32 = (n: number) => [I32_CONST, ...sleb(n)];
/** A 16-byte load at the cursor plus `offset` (alignment hint 1 byte: any address works). */
const load16 = (offset: number) => [...get(FROM), SIMD, V128_LOAD, 0, ...leb(offset)];
/** from += n */
const advance = (n: number) => [...get(FROM), ...i32(n), I32_ADD, ...set(FROM)];
/** Leaves the enclosing block when from + n > to: fewer than `n` bytes are left. */
const exitIfShort = (n: number) => [...get(FROM), ...i32(n), I32_ADD, ...get(TO), I32_GT_U, BR_IF, 1];
/** Pushes count + n. */
const countPlusN = () => [...get(COUNT), ...get(N), I32_ADD];
/** count += 1, leaving the new count on the stack. */
const bumpCount = () => [...get(COUNT), ...i32(1), I32_ADD, LOCAL_TEE, COUNT];
/** acc's lane `lane` (i32x4). */
const lane = (l: number) => [...get(ACC), SIMD, I32X4_EXTRACT_LANE, l];
/** A loop that `body` leaves with `br_if 1` (out of the block) and that repeats at its end. */
const repeat = (...body: number[]) => [BLOCK, VOID, LOOP, VOID, ...body, BR, 0, END, END];

/** `nth`'s body: a 256-byte stride loop, a 16-byte loop that finds the exact newline, and a byte loop for the rest. */
function body(): number[] {
  const stride: number[] = [SIMD, V128_CONST, ...new Array(16).fill(0), ...set(ACC)];
  for (let u = 0; u < 16; u++) {
    // acc -= (block == '\n'), whose true lanes are -1: a lane counts at most 16 blocks, so it cannot wrap.
    stride.push(...get(ACC), ...load16(u * 16), ...get(NL), SIMD, I8X16_EQ, SIMD, I8X16_SUB, ...set(ACC));
  }
  // n = the stride's newlines: the sum of acc's lanes, widened twice, then across.
  stride.push(
    ...get(ACC),
    SIMD,
    ...leb(I16X8_EXTADD_PAIRWISE_I8X16_U),
    SIMD,
    ...leb(I32X4_EXTADD_PAIRWISE_I16X8_U),
    ...set(ACC),
    ...lane(0),
    ...lane(1),
    I32_ADD,
    ...lane(2),
    I32_ADD,
    ...lane(3),
    I32_ADD,
    ...set(N),
  );
  return [
    // nl = splat('\n')
    ...i32(10),
    SIMD,
    I8X16_SPLAT,
    ...set(NL),
    // Strides of 256 bytes while the k-th newline lies beyond them.
    ...repeat(
      ...exitIfShort(256),
      ...stride,
      ...countPlusN(),
      ...get(K),
      I32_GE_U,
      BR_IF,
      1,
      ...countPlusN(),
      ...set(COUNT),
      ...advance(256),
    ),
    // Blocks of 16: the bitmask of newlines, and the exact one once the count reaches k.
    ...repeat(
      ...exitIfShort(16),
      ...load16(0),
      ...get(NL),
      SIMD,
      I8X16_EQ,
      SIMD,
      I8X16_BITMASK,
      LOCAL_TEE,
      MASK,
      I32_POPCNT,
      ...set(N),
      ...countPlusN(),
      ...get(K),
      I32_GE_U,
      IF,
      VOID,
      LOOP,
      VOID,
      ...bumpCount(),
      ...get(K),
      I32_EQ,
      IF,
      VOID,
      ...get(FROM),
      ...get(MASK),
      I32_CTZ,
      I32_ADD,
      RETURN,
      END,
      // mask &= mask - 1: drop the lowest newline
      ...get(MASK),
      ...get(MASK),
      ...i32(1),
      I32_SUB,
      I32_AND,
      ...set(MASK),
      BR,
      0,
      END,
      END,
      ...countPlusN(),
      ...set(COUNT),
      ...advance(16),
    ),
    // The last bytes one at a time.
    ...repeat(
      ...get(FROM),
      ...get(TO),
      I32_GE_U,
      BR_IF,
      1,
      ...get(FROM),
      I32_LOAD8_U,
      0,
      0,
      ...i32(10),
      I32_EQ,
      IF,
      VOID,
      ...bumpCount(),
      ...get(K),
      I32_EQ,
      IF,
      VOID,
      ...get(FROM),
      RETURN,
      END,
      END,
      ...advance(1),
    ),
    // Fewer than k: -1 - count.
    ...i32(-1),
    ...get(COUNT),
    I32_SUB,
    END,
  ];
}

function section(id: number, content: number[]): number[] {
  return [id, ...leb(content.length), ...content];
}

/** The module's bytes. */
function newlineModuleBytes(): Uint8Array {
  const code = body();
  const locals = [2, 3, I32, 2, V128]; // two groups: three i32, two v128
  const fn = [...locals, ...code];
  const name = [...'nth'].map((c) => c.charCodeAt(0));
  const mem = [...'mem'].map((c) => c.charCodeAt(0));
  return Uint8Array.from([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    // type 0: (i32, i32, i32) -> i32
    ...section(1, [1, 0x60, 3, I32, I32, I32, 1, I32]),
    // one function of type 0
    ...section(3, [1, 0]),
    // one memory: PAGES pages, no maximum
    ...section(5, [1, 0, PAGES]),
    // exports: nth (function 0), mem (memory 0)
    ...section(7, [2, name.length, ...name, 0x00, 0, mem.length, ...mem, 0x02, 0]),
    ...section(10, [1, ...leb(fn.length), ...fn]),
  ]);
}

/** The few WebAssembly globals used here (the project's `lib` has no DOM, where their types live). */
interface WasmGlobals {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
}

let finder: NewlineFinder | null | undefined;

/** Undefined without WebAssembly SIMD, or with `SLUICE_NEWLINE_SIMD=0`. */
export function newlineFinder(): NewlineFinder | undefined {
  if (finder !== undefined) return finder ?? undefined;
  finder = null;
  const wasm = (globalThis as { WebAssembly?: WasmGlobals }).WebAssembly;
  if (process.env.SLUICE_NEWLINE_SIMD === '0' || wasm === undefined) return undefined;
  try {
    const instance = new wasm.Instance(new wasm.Module(newlineModuleBytes()));
    const memory = instance.exports.mem as { buffer: ArrayBuffer };
    const nth = instance.exports.nth as (from: number, to: number, k: number) => number;
    finder = { bytes: new Uint8Array(memory.buffer), capacity: PAGES * 65536, nth };
  } catch {
    // No SIMD in this runtime (the module does not validate).
  }
  return finder ?? undefined;
}
