/** GET /v1/read answers with bytes only when the client prefers them to JSON, by the Accept header's quality values. */
import { describe, expect, it } from 'vitest';
import { wantsBytes } from '../../server/routes.js';

describe('Accept negotiation of GET /v1/read', () => {
  it.each([
    [undefined, false],
    ['', false],
    ['*/*', false],
    ['application/json', false],
    ['application/octet-stream', true],
    ['Application/Octet-Stream', true],
    ['application/octet-stream;q=0', false],
    ['application/json, application/octet-stream;q=0', false],
    ['application/json;q=0.5, application/octet-stream', true],
    ['application/octet-stream, application/json', false],
    ['application/octet-stream, */*;q=0.1', true],
    ['application/octet-stream;q=0.2, application/*;q=0.5', false],
  ])('Accept: %j → bytes %s', (accept, bytes) => {
    expect(wantsBytes(accept)).toBe(bytes);
  });
});
