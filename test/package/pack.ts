/**
 * What the package tests share: the packed tarball of this checkout (from the
 * built dist/, as `npm publish` would ship it) and a consumer project that
 * installs it offline.
 */
import { execFile } from 'node:child_process';
import { promises as fsp, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** The repository root. */
export const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

/** package.json of this checkout. */
export const PACKAGE = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  engines: { node: string };
  exports: Record<string, string | Record<string, string>>;
  files: string[];
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  devDependencies: Record<string, string>;
  bin: Record<string, string>;
};

const run = promisify(execFile);

/** Runs npm with `args` in `cwd`; resolves to its stdout and stderr. */
export async function npm(args: string[], cwd: string): Promise<{ stdout: string; stderr: string }> {
  // Scripts never run: `--ignore-scripts` on pack (dist/ is built by `npm test` first), nothing to run on install.
  return run('npm', args, {
    cwd,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });
}

/** One file of `npm pack --json`. */
export interface PackedFile {
  path: string;
  size: number;
}

/** `npm pack --dry-run --json` of this checkout: the files the tarball would hold. */
export async function packedFiles(): Promise<PackedFile[]> {
  const { stdout } = await npm(['pack', '--dry-run', '--json', '--ignore-scripts'], ROOT);
  const [entry] = JSON.parse(stdout) as [{ files: PackedFile[] }];
  return entry.files;
}

/** Packs this checkout into `dir`; resolves to the tarball's path. */
export async function packInto(dir: string): Promise<string> {
  const { stdout } = await npm(['pack', '--json', '--ignore-scripts', '--pack-destination', dir], ROOT);
  const [entry] = JSON.parse(stdout) as [{ filename: string }];
  return join(dir, entry.filename);
}

interface LockEntry {
  dev?: boolean;
  devOptional?: boolean;
  peer?: boolean;
  [key: string]: unknown;
}

/**
 * A consumer project in `dir` depending only on `tarball`, with the
 * package-lock.json npm would write for it: sluice's own lockfile entries
 * that are not development-only are exactly the tree a consumer resolves
 * (the same versions, hoisted the same way). With the lockfile, `npm ci
 * --offline` installs from the npm cache that `npm ci` of this checkout
 * filled, without the registry: fast, and the same on every machine.
 */
export async function writeConsumer(dir: string, tarball: string): Promise<void> {
  const lock = JSON.parse(await fsp.readFile(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const spec = `file:${tarball}`;
  const packages: Record<string, unknown> = {
    '': { name: 'consumer', version: '1.0.0', dependencies: { [PACKAGE.name]: spec } },
    [`node_modules/${PACKAGE.name}`]: {
      version: PACKAGE.version,
      resolved: spec,
      license: 'MIT',
      dependencies: PACKAGE.dependencies,
      peerDependencies: PACKAGE.peerDependencies,
      peerDependenciesMeta: PACKAGE.peerDependenciesMeta,
      engines: PACKAGE.engines,
      bin: PACKAGE.bin,
    },
  };
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === '' || entry.dev || entry.devOptional) continue;
    const { dev: _d, devOptional: _o, ...rest } = entry;
    packages[path] = rest;
  }
  const manifest = { name: 'consumer', version: '1.0.0', private: true, dependencies: { [PACKAGE.name]: spec } };
  await fsp.writeFile(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const consumerLock = { name: 'consumer', version: '1.0.0', lockfileVersion: 3, requires: true, packages };
  await fsp.writeFile(join(dir, 'package-lock.json'), `${JSON.stringify(consumerLock, null, 2)}\n`);
}

/** The packages installed under `dir`/node_modules (scoped ones as `@scope/name`), sorted. */
export async function installedPackages(dir: string): Promise<string[]> {
  const { stdout } = await npm(['ls', '--all', '--omit=dev', '--parseable'], dir);
  const prefix = `${join(dir, 'node_modules')}/`;
  return stdout
    .split('\n')
    .filter((line) => line.startsWith(prefix))
    .map((line) => line.slice(prefix.length).replace(/\/node_modules\//g, ' > '))
    .sort();
}
