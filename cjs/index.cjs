'use strict';
/**
 * `require('sluice')`. sluice is an ES module; Node.js 20.19 and later load it
 * for `require` by themselves (require(esm)), and this file only hands that
 * module over, so `require` and `import` share one instance. Where require(esm)
 * is not available (Node.js before 20.19, or `--no-experimental-require-module`)
 * Node's ERR_REQUIRE_ESM is replaced by an error that says what to do.
 */
try {
  module.exports = require('../dist/engine/index.js');
} catch (err) {
  if (err && err.code === 'ERR_REQUIRE_ESM') {
    const e = new Error(
      `require('sluice') needs require(esm), on by default from Node.js 20.19 (this is ${process.version}, ` +
        "or it was turned off with --no-experimental-require-module); upgrade Node.js, or load sluice with import / await import('sluice')",
    );
    e.code = 'EUNSUPPORTED';
    e.cause = err;
    throw e;
  }
  throw err;
}
