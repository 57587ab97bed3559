/**
 * The approval policy an engine uses when the host gives none. Light on
 * purpose (node:fs and node:path only): Engine.open builds it before any
 * other module is loaded.
 */
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ApprovalPolicy } from './call-types.js';

/**
 * The default approval policy: everything is allowed except filesystem reads
 * outside the working root (the read tool checks real paths, so symlinks out
 * of the root are refused too).
 */
export function defaultApproval(root: string): ApprovalPolicy {
  // Compared with real paths, so the root must be one too (a symlinked working directory).
  let base = resolve(root);
  try {
    base = realpathSync(base);
  } catch {
    // A root that does not exist allows nothing beyond its own path.
  }
  return (op) => {
    if (op.kind !== 'fs.read') return true;
    const path = typeof op.realPath === 'string' ? op.realPath : typeof op.path === 'string' ? op.path : '';
    const p = resolve(path);
    return p === base || p.startsWith(base.endsWith('/') ? base : `${base}/`);
  };
}
