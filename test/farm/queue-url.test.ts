/**
 * A queue URL names a server and a queue on it; anything else is refused
 * with EBADOPTION before a connection is tried.
 */
import { describe, expect, it } from 'vitest';
import { FarmQueue, parseQueueUrl, queueFromEnv } from '../../engine/farm/index.js';

describe('queue URLs', () => {
  it('nats://host:port/NAME gives the server and the name; the port defaults to 4222; credentials are kept out of display', () => {
    expect(parseQueueUrl('nats://127.0.0.1:4333/farm_1')).toMatchObject({
      server: '127.0.0.1:4333',
      name: 'farm_1',
      display: 'nats://127.0.0.1:4333/farm_1',
    });
    expect(parseQueueUrl('nats://queue.example/f').server).toBe('queue.example:4222');
    const withUser = parseQueueUrl('nats://ann:s%40cret@h:1/q');
    expect(withUser).toMatchObject({ user: 'ann', pass: 's@cret', display: 'nats://ann@h:1/q' });
    expect(withUser.display).not.toContain('cret');
  });

  it.each([
    ['', 'not a URL'],
    ['127.0.0.1:4222/q', 'no scheme'],
    ['redis://127.0.0.1:6379/q', 'another scheme'],
    ['nats://127.0.0.1:4222', 'no name'],
    ['nats://127.0.0.1:4222/', 'an empty name'],
    ['nats://127.0.0.1:4222/a/b', 'a path'],
    ['nats://127.0.0.1:4222/a.b', 'a dot, which subjects reserve'],
    ['nats://127.0.0.1:4222/q?x=1', 'a query'],
    [`nats://127.0.0.1:4222/${'q'.repeat(65)}`, 'a name over 64 characters'],
  ])('%j (%s) is EBADOPTION', (url) => {
    expect(() => parseQueueUrl(url)).toThrow(expect.objectContaining({ code: 'EBADOPTION' }));
  });

  it('SLUICE_QUEUE names the queue when set; FarmQueue.open refuses a malformed one before connecting', async () => {
    expect(queueFromEnv({})).toBeUndefined();
    expect(queueFromEnv({ SLUICE_QUEUE: 'nats://h:5/q' })?.name).toBe('q');
    expect(() => queueFromEnv({ SLUICE_QUEUE: 'nats://h:5' })).toThrow(expect.objectContaining({ code: 'EBADOPTION' }));
    await expect(FarmQueue.open('http://127.0.0.1:1/q')).rejects.toMatchObject({ code: 'EBADOPTION' });
    await expect(FarmQueue.open('nats://127.0.0.1:1/q', { ackWaitMs: 0 })).rejects.toMatchObject({
      code: 'EBADOPTION',
    });
  });
});
