/**
 * The store's durable path is fsync-bound: every publish fsyncs a file and a
 * directory, and every terminal record fsyncs its log. libuv runs those on its
 * threadpool, 4 threads by default, so 16 calls in flight queue behind 4
 * fsyncs (bench/overhead.ts: about 1.7x more publishes per second with 16
 * threads). The pool size is read once, when the pool first starts, so this
 * module runs before anything touches the filesystem. A value the host set
 * itself is kept.
 */
if (!process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = '16';

/** The threadpool size asked for (effective only if nothing used the pool before sluice was imported). */
export const THREADPOOL_SIZE = Number(process.env.UV_THREADPOOL_SIZE);
