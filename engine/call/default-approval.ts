/** The approval policy an engine uses when the host gives none; node:fs and node:path only, since Engine.open builds it before loading the rest. */
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ApprovalPolicy } from './call-types.js';

/** Marks a policy that allows every kind but the listed ones unseen: workers then ask only for those, which saves bash a round trip per call. */
export const ASKS_ONLY: unique symbol = Symbol('sluice.approval.asksOnly');

/** The kinds a policy marked with {@link ASKS_ONLY} decides; undefined for any other policy (it decides everything). */
export function asksOnly(policy: ApprovalPolicy): readonly string[] | undefined {
  return (policy as { [ASKS_ONLY]?: readonly string[] })[ASKS_ONLY];
}

/** The default policy: everything but filesystem reads outside the working root (real paths, so symlinks out of it are refused too). */
export function defaultApproval(root: string): ApprovalPolicy {
  // Compared with real paths, so the root must be one too (a symlinked working directory).
  let base = resolve(root);
  try {
    base = realpathSync(base);
  } catch {
    // A root that does not exist allows nothing beyond its own path.
  }
  const policy: ApprovalPolicy = (op) => {
    if (op.kind !== 'fs.read') return true;
    const path = typeof op.realPath === 'string' ? op.realPath : typeof op.path === 'string' ? op.path : '';
    const p = resolve(path);
    return p === base || p.startsWith(base.endsWith('/') ? base : `${base}/`);
  };
  return Object.assign(policy, { [ASKS_ONLY]: ['fs.read'] as const });
}
