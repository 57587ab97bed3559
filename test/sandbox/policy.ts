/** The sandbox policy the limit tests run under: workspace-write, no network, PATH only. */
import type { SandboxLimits, SandboxPolicy } from '../../engine/protocol/sandbox.js';

/** A policy writable in `workspace` alone, with `limits`. */
export function limitsPolicy(workspace: string, limits: SandboxLimits): SandboxPolicy {
  return { filesystem: 'workspace-write', network: 'off', workspace, writable: [], hidden: [], env: ['PATH'], limits };
}
