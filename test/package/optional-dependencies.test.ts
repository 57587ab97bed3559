/**
 * Optional dependencies (engine/protocol/optional-dependencies.ts) agree with
 * package.json, resolve when installed, and fail typed with the install
 * command when not; the platform check refuses what sluice cannot run on.
 */
import { describe, expect, it } from 'vitest';
import { assertSupportedPlatform, platformProblem } from '../../engine/platform.js';
import { SluiceError } from '../../engine/protocol/errors.js';
import {
  installCommand,
  OPTIONAL_DEPENDENCIES,
  type OptionalDependency,
  requireOptional,
} from '../../engine/protocol/optional-dependencies.js';
import { PACKAGE } from './pack.js';

describe('optional dependencies', () => {
  it('each is an optional peer dependency with the same range, and a pinned devDependency within it', () => {
    const deps = Object.values(OPTIONAL_DEPENDENCIES) as OptionalDependency[];
    expect(Object.keys(PACKAGE.peerDependencies).sort()).toEqual(deps.map((d) => d.name).sort());
    for (const d of deps) {
      expect(PACKAGE.peerDependencies[d.name]).toBe(d.range);
      expect(PACKAGE.peerDependenciesMeta[d.name]).toEqual({ optional: true });
      expect(PACKAGE.dependencies[d.name]).toBeUndefined();
      expect(d.range).toBe(`^${PACKAGE.devDependencies[d.name]}`);
    }
  });

  it('an installed one resolves to a file URL inside node_modules', () => {
    const url = requireOptional(OPTIONAL_DEPENDENCIES.mcp);
    expect(url).toMatch(/^file:\/\/.*\/node_modules\/@modelcontextprotocol\/sdk\/.*\.js$/);
  });

  it('a missing one is EMISSINGDEP naming the package, the feature and the install command', () => {
    const absent: OptionalDependency = {
      name: '@sluice-test/absent',
      range: '^1.0.0',
      entry: '@sluice-test/absent/index.js',
      feature: 'The test feature',
    };
    let caught: unknown;
    try {
      requireOptional(absent);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SluiceError);
    expect(caught).toMatchObject({
      code: 'EMISSINGDEP',
      details: {
        dependency: '@sluice-test/absent',
        range: '^1.0.0',
        install: "npm install @sluice-test/absent@'^1.0.0'",
      },
    });
    expect((caught as Error).message).toBe(
      "The test feature need the optional dependency @sluice-test/absent (^1.0.0), which is not installed: npm install @sluice-test/absent@'^1.0.0'",
    );
    expect(installCommand(absent)).toBe("npm install @sluice-test/absent@'^1.0.0'");
  });

  it('an installed copy without the entry (another major version) is EMISSINGDEP saying so', () => {
    const notExported = Object.assign(new Error('not exported'), { code: 'ERR_PACKAGE_PATH_NOT_EXPORTED' });
    let caught: unknown;
    try {
      requireOptional(OPTIONAL_DEPENDENCIES.mcp, () => {
        throw notExported;
      });
    } catch (err) {
      caught = err;
    }
    expect(caught).toMatchObject({ code: 'EMISSINGDEP' });
    expect((caught as Error).message).toContain(
      'which is installed in a version without @modelcontextprotocol/sdk/client/index.js: npm install',
    );
  });

  it('a resolver failure other than "not found" is not disguised as a missing dependency', () => {
    const boom = Object.assign(new Error('EACCES reading package.json'), { code: 'EACCES' });
    expect(() =>
      requireOptional(OPTIONAL_DEPENDENCIES.mcp, () => {
        throw boom;
      }),
    ).toThrow(boom);
  });
});

describe('supported platforms', () => {
  it('Linux is supported; macOS, Windows and the BSDs are EUNSUPPORTED saying why', () => {
    expect(platformProblem('linux')).toBeUndefined();
    expect(() => assertSupportedPlatform('linux')).not.toThrow();
    for (const p of ['darwin', 'win32', 'freebsd', 'openbsd', 'aix', 'sunos'] as const) {
      let caught: unknown;
      try {
        assertSupportedPlatform(p);
      } catch (err) {
        caught = err;
      }
      expect(caught).toMatchObject({ code: 'EUNSUPPORTED', details: { platform: p } });
      expect((caught as Error).message).toContain('POSIX process groups, bash, and /proc');
      expect((caught as Error).message).toContain(JSON.stringify(p));
    }
  });
});
