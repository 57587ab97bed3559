/**
 * The address of a farm queue: `nats://host:port/NAME`, from `--queue` or
 * `SLUICE_QUEUE`. NAME picks the queue on that server, so farms can share
 * one server; it becomes part of stream and subject names, hence its
 * narrow alphabet.
 */
import { BadOptionError } from '../protocol/errors.js';

/** A parsed queue URL. */
export interface QueueAddress {
  /** `host:port` to connect to (port 4222 when the URL names none). */
  readonly server: string;
  /** The queue's name on that server (`[A-Za-z0-9_-]`, at most 64 characters). */
  readonly name: string;
  /** Credentials from the URL's user information, when it has some. */
  readonly user?: string;
  readonly pass?: string;
  /** The URL as given, without its password, for messages. */
  readonly display: string;
}

/** The environment variable naming the queue when no option does. */
export const QUEUE_ENV = 'SLUICE_QUEUE';

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const DEFAULT_PORT = '4222';

function bad(text: string, why: string): BadOptionError {
  return new BadOptionError(`queue URL ${JSON.stringify(text)}: ${why} (expected nats://host:port/NAME)`, {
    queue: text,
  });
}

/** Parses `nats://[user:pass@]host[:port]/NAME`, or throws EBADOPTION saying what is wrong. */
export function parseQueueUrl(text: string): QueueAddress {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw bad(text, 'not a URL');
  }
  if (url.protocol !== 'nats:') throw bad(text, `scheme ${JSON.stringify(url.protocol.slice(0, -1))} is not nats`);
  if (url.hostname === '') throw bad(text, 'no host');
  if (url.search !== '' || url.hash !== '') throw bad(text, 'a query or fragment is not understood');
  const name = url.pathname.slice(1);
  if (name === '') throw bad(text, 'no queue NAME after the host');
  if (!NAME.test(name)) throw bad(text, `queue name ${JSON.stringify(name)} is not 1-64 of [A-Za-z0-9_-]`);
  const server = `${url.hostname}:${url.port || DEFAULT_PORT}`;
  const user = url.username === '' ? undefined : decodeURIComponent(url.username);
  const pass = url.password === '' ? undefined : decodeURIComponent(url.password);
  const display = `nats://${user === undefined ? '' : `${url.username}@`}${server}/${name}`;
  return { server, name, display, ...(user === undefined ? {} : { user }), ...(pass === undefined ? {} : { pass }) };
}

/** The queue named by `SLUICE_QUEUE`, or undefined when it is unset or empty. */
export function queueFromEnv(
  env: Readonly<Record<string, string | undefined>> = process.env,
): QueueAddress | undefined {
  const text = env[QUEUE_ENV];
  return text ? parseQueueUrl(text) : undefined;
}
