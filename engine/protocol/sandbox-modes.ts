/** The sandbox's modes, apart from its schemas (sandbox.ts): the CLI checks its flags against them without loading zod. */

/** How much of the filesystem a sandboxed process may write; `off` runs it unconfined. */
export const SANDBOX_FILESYSTEM_MODES = ['off', 'workspace-write', 'read-only'] as const;
/** `off`: a network namespace of its own with only loopback; `on`: the host's network. */
export const SANDBOX_NETWORK_MODES = ['on', 'off'] as const;
