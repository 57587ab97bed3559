/**
 * The file piscina loads in each worker thread: it hands piscina the task
 * function of `entry.js` through an asynchronous `import()`.
 *
 * piscina loads its `filename` with `require()` first. On Node 20, `require()`
 * of an ES module whose instantiation is interrupted (the pool terminating a
 * thread that is still loading, as `Engine.close()` right after
 * `Engine.open()` does) aborts the whole process with a V8 fatal error
 * (`v8::Module::IsGraphAsync must be used on an instantiated module`) instead
 * of throwing. `import()` fails such a load as a rejected promise, so this
 * CommonJS file is what piscina requires, and the ES module graph is only
 * ever loaded asynchronously. Its default export is a promise of the task
 * function, a form piscina accepts and awaits before the thread reports
 * ready, so a warm thread has its entry loaded.
 */
const { pathToFileURL } = require('node:url') as typeof import('node:url');
const { join } = require('node:path') as typeof import('node:path');

type TaskFunction = (task: unknown) => Promise<unknown>;

// Marked as a transpiled ES module, so a loader's interop hands over `default` as it is. A failed load
// becomes a task function that fails with that error: piscina would otherwise catch the rejection and
// report every task as "No handler function exported", hiding why.
Object.defineProperty(exports, '__esModule', { value: true });
exports.default = import(pathToFileURL(join(__dirname, 'entry.js')).href).then(
  (m: { default: TaskFunction }) => m.default,
  (err: unknown): TaskFunction =>
    async () => {
      throw err;
    },
);
