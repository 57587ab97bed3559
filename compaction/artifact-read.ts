/**
 * Recognising artifact retrieval in a model history: a call to the tool
 * named exactly `read` (or `grep`, which searches artifacts and returns
 * their lines) whose `filePath` argument, taken from the parsed arguments
 * object, has the artifact scheme. Never by substring search in
 * serialised JSON (a file named `/tmp/artifact://x` is a filesystem read) and
 * never by the tool name alone (`read` of a normal path is a filesystem read).
 */
import { type ArtifactUri, isArtifactUri, parseArtifactUri } from '../store/uri.js';
import type { ToolCallItem } from './history.js';
import { argumentsObject } from './json.js';

/** The name of the built-in tool that reads artifacts and files. */
export const READ_TOOL = 'read';

/** The name of the built-in tool that searches artifacts: its output is artifact content too. */
export const SEARCH_TOOL = 'grep';

/** What an artifact read call addressed. */
export interface ArtifactReadTarget {
  /** The `filePath` argument as the model sent it. */
  filePath: string;
  /**
   * The parsed URI, or null for a malformed one (`ARTIFACT://...`,
   * `artifact:abc`): the read tool dispatches those to the store too and
   * fails with EBADURI; they are never filesystem paths.
   */
  uri: ArtifactUri | null;
}

/**
 * The artifact a call reads, or undefined when the call is not an artifact
 * read (another tool, a filesystem path, arguments without a string
 * `filePath`, or arguments that are not a JSON object).
 */
export function artifactReadTarget(call: Pick<ToolCallItem, 'tool' | 'args'>): ArtifactReadTarget | undefined {
  if (call.tool !== READ_TOOL && call.tool !== SEARCH_TOOL) return undefined;
  const args = argumentsObject(call.args);
  if (args === undefined || !Object.hasOwn(args, 'filePath')) return undefined;
  const filePath = args.filePath;
  // Same test the read tool dispatches on: the scheme at the very start.
  if (typeof filePath !== 'string' || !isArtifactUri(filePath)) return undefined;
  let uri: ArtifactUri | null;
  try {
    uri = parseArtifactUri(filePath);
  } catch {
    uri = null;
  }
  return { filePath, uri };
}

/** True when `call` is an artifact read (see {@link artifactReadTarget}). */
export function isArtifactRead(call: Pick<ToolCallItem, 'tool' | 'args'>): boolean {
  return artifactReadTarget(call) !== undefined;
}
