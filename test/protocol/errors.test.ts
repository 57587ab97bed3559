/**
 * The error model's edges: OS errors are read by their syscall before their
 * code, every class keeps a cause, and the classes are branded so checks
 * work across two copies of the package.
 */

import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import {
  DiskError,
  ERROR_CODES,
  makeError,
  NotFoundError,
  SluiceError,
  TimeoutError,
  toSluiceError,
} from '../../engine/protocol/errors.js';

describe('toSluiceError', () => {
  it("reads a DNS failure by its syscall: getaddrinfo ENOTFOUND is the tool's failure, not a missing artifact", () => {
    // As node:dns raises it (built here: whether a lookup fails with ENOTFOUND or EAI_AGAIN depends on the resolver).
    const err = Object.assign(new Error('getaddrinfo ENOTFOUND registry.example'), {
      errno: -3008,
      code: 'ENOTFOUND',
      syscall: 'getaddrinfo',
      hostname: 'registry.example',
    });
    const e = toSluiceError(err);
    expect([e.code, e.details]).toEqual(['ETOOLFAILED', { errno: 'ENOTFOUND', syscall: 'getaddrinfo' }]);
    expect(e.cause).toBe(err);
    expect(toSluiceError(err, 'EDISK').code).toBe('EDISK');
  });

  it('turns a filesystem failure into EDISK with its errno, syscall and cause', async () => {
    const err = await readFile('/nonexistent/sluice-test').catch((e: unknown) => e);
    const e = toSluiceError(err, 'EPROTOCOL');
    expect(e).toBeInstanceOf(DiskError);
    expect(e.details).toEqual({ errno: 'ENOENT', syscall: 'open' });
    expect(e.cause).toBe(err);
  });

  it("keeps a sluice code an object names, and a thrower's own code beside the fallback", () => {
    const named = { code: 'ETIMEOUT', message: 'slow' };
    expect(toSluiceError(named)).toBeInstanceOf(TimeoutError);
    expect(toSluiceError(named).cause).toBe(named);
    const own = toSluiceError({ code: 'EMINE', message: 'mine' });
    expect([own.code, own.details]).toEqual(['ETOOLFAILED', { toolCode: 'EMINE' }]);
  });
});

describe('error classes', () => {
  it('every class keeps the cause it is given', () => {
    const cause = new Error('underneath');
    for (const code of ERROR_CODES) {
      const e = makeError(code, 'm', { k: 1 }, { cause });
      expect([e.code, e.cause, e.details]).toEqual([code, cause, { k: 1 }]);
    }
  });

  it('instanceof works across two copies of the package, by brand and code', async () => {
    // The built copy is a second module instance: its classes are different objects.
    const other = (await import(
      new URL('../../dist/engine/protocol/errors.js', import.meta.url).href
    )) as typeof import('../../engine/protocol/errors.js');
    expect(other.NotFoundError).not.toBe(NotFoundError);
    const theirs = new other.NotFoundError('gone');
    expect(theirs).toBeInstanceOf(SluiceError);
    expect(theirs).toBeInstanceOf(NotFoundError);
    expect(theirs).not.toBeInstanceOf(TimeoutError);
    expect(new NotFoundError('gone')).toBeInstanceOf(other.NotFoundError);
    expect(toSluiceError(theirs)).toBe(theirs);
    // Not branded: a look-alike is not a sluice error.
    expect({ code: 'ENOTFOUND', message: 'x' }).not.toBeInstanceOf(SluiceError);
    expect(new Error('x')).not.toBeInstanceOf(SluiceError);
  });

  it('a subclass a user writes keeps the ordinary prototype check', () => {
    class Mine extends SluiceError {}
    const m = new Mine('ETOOLFAILED', 'mine');
    expect(m).toBeInstanceOf(Mine);
    expect(m).toBeInstanceOf(SluiceError);
    expect(new NotFoundError('x')).not.toBeInstanceOf(Mine);
  });
});
