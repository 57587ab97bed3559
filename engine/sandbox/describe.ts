/**
 * The sandbox in words for the model: appended to the description of a
 * tool whose processes run under it, so the model knows before it tries
 * that a write outside the workspace or a download will fail.
 */
import type { SandboxLimits, SandboxPolicy } from '../protocol/sandbox.js';
import { formatBytes } from '../protocol/units.js';

/** One paragraph: what is writable, the network, the hidden paths in short, the limits. */
export function describeSandbox(policy: SandboxPolicy): string {
  const writable =
    policy.filesystem === 'read-only'
      ? 'the filesystem is read-only except a private /tmp'
      : `only ${[policy.workspace, ...policy.writable].join(', ')} and a private /tmp are writable`;
  const network = policy.network === 'off' ? 'there is no network' : 'the network is reachable';
  const limits = describeLimits(policy.limits);
  return `Commands run in a sandbox: ${writable}; ${network}; credentials and the tool output store are hidden${limits ? `; limits: ${limits}` : ''}.`;
}

function describeLimits(limits: SandboxLimits | undefined): string {
  if (!limits) return '';
  const parts: string[] = [];
  if (limits.memoryBytes !== undefined) parts.push(`memory ${formatBytes(limits.memoryBytes)}`);
  if (limits.cpuSeconds !== undefined) parts.push(`${limits.cpuSeconds} CPU seconds per process`);
  if (limits.processes !== undefined) parts.push(`${limits.processes} processes`);
  if (limits.fileSizeBytes !== undefined) parts.push(`files up to ${formatBytes(limits.fileSizeBytes)}`);
  if (limits.openFiles !== undefined) parts.push(`${limits.openFiles} open files`);
  return parts.join(', ');
}
