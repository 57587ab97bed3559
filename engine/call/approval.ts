/**
 * The approval host service a worker calls before a prepared operation
 * (a file read, a process spawn): the host's policy decides, and a denial,
 * or a policy that throws, is a typed EDENIED the tool sees.
 */
import { DeniedError } from '../protocol/errors.js';
import type { PreparedOperation } from '../protocol/messages.js';
import type { ApprovalPolicy } from './call-types.js';

/** The host services of a call (exposed over comlink on first use). */
export function approvalService(approve: ApprovalPolicy, info: Parameters<ApprovalPolicy>[1]) {
  return {
    approve: async (op: PreparedOperation): Promise<void> => {
      let ok: boolean;
      try {
        ok = await approve(op, info);
      } catch (err) {
        throw new DeniedError(`${op.kind} denied: ${(err as Error)?.message ?? String(err)}`, { op: op.kind });
      }
      if (ok !== true) throw new DeniedError(`${op.kind} denied by the host's approval policy`, { op: op.kind });
    },
  };
}
