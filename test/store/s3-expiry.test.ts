/**
 * Ages judged on the S3 server's clock (store/s3/expiry.ts): both times are
 * whole seconds, so each judgement grants the second it cannot see, on the
 * side that keeps what it judges.
 */
import { describe, expect, it } from 'vitest';
import { expiredOnServer, youngOnServer } from '../../store/s3/expiry.js';

const at = (s: number) => new Date(s * 1000);

describe('S3 server-clock ages', () => {
  it('a blob is young until a whole second past the grace period, and never at grace 0', () => {
    // Written at 10.9 s (reads 10), judged at 20.0 s (reads 20): 9.1 s old, with 10 s of grace.
    expect(youngOnServer(at(10), at(20), 10_000)).toBe(true);
    expect(youngOnServer(at(10), at(20.999), 10_000)).toBe(true);
    expect(youngOnServer(at(10), at(21), 10_000)).toBe(false);
    expect(youngOnServer(at(10), at(10), 0)).toBe(false);
    expect(youngOnServer(undefined, at(20), 10_000)).toBe(true);
    expect(youngOnServer(at(10), undefined, 10_000)).toBe(true);
  });

  it('a holder expires only a whole second past its promise, and never when a time is unknown', () => {
    expect(expiredOnServer(at(10), at(20.999), 10_000)).toBe(false);
    expect(expiredOnServer(at(10), at(21), 10_000)).toBe(true);
    expect(expiredOnServer(undefined, at(99), 10_000)).toBe(false);
    expect(expiredOnServer(at(10), at(99), Number.POSITIVE_INFINITY)).toBe(false);
  });
});
