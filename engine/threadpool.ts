/**
 * The store's durable path is fsync-bound: every publish fsyncs a file and a
 * directory, every terminal record fsyncs its log, and a long capture flushes
 * in the background. libuv runs those on its threadpool, 4 threads by
 * default, where a slow fsync holds a thread that writes could use.
 *
 * The pool size is read once, when the pool first starts. A CommonJS host
 * that loads sluice before touching the filesystem gets 16 threads from this
 * module. An ESM entry point does not: Node starts the pool (with 4 threads)
 * while it loads the entry's modules, before any of them runs, so there the
 * size has to come from the environment (`UV_THREADPOOL_SIZE=16 node ...`).
 * Measured effect (docs/benchmarks.md): concurrency aggregate +0–9%, per-call
 * overhead within noise. A value the host set itself is kept.
 */
if (!process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = '16';

/** The threadpool size asked for (effective only if nothing used the pool before sluice was imported). */
export const THREADPOOL_SIZE = Number(process.env.UV_THREADPOOL_SIZE);
