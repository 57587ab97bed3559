/** Whether a path names a program this process may run. */
import { accessSync, constants, statSync } from 'node:fs';

/** True when `path` is a regular file this process may execute. */
export function executableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
