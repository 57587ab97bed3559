/**
 * Names the MCP server's front ends share, in a module that loads nothing
 * (no SDK), so `sluice serve` routes `/mcp` and `sluice mcp` names its
 * session before the SDK is imported.
 */
import { randomBytes } from 'node:crypto';

/** The path the MCP endpoint is served at by `sluice serve`. */
export const MCP_PATH = '/mcp';

/**
 * A new sluice session id for one MCP connection (stdio) or MCP session
 * (Streamable HTTP): `mcp-<UTC time to the second>-<8 hex>`, when it started
 * and enough randomness that two never meet.
 */
export function connectionSessionId(now = new Date()): string {
  const at = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return `mcp-${at}-${randomBytes(4).toString('hex')}`;
}
