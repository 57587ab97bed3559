/**
 * The spawn helper's environment (workers/helper-env.ts): the Node variables
 * it runs without are carried under held names and given back, unchanged,
 * to the processes it starts.
 */
import { describe, expect, it } from 'vitest';
import { HELD_PREFIX, HELPER_WITHOUT, helperEnv, toolEnv } from '../../workers/helper-env.js';

describe('the spawn helper environment', () => {
  it('holds NODE_EXTRA_CA_CERTS and NODE_OPTIONS under carrier names and restores them exactly', () => {
    const engine = { PATH: '/usr/bin', NODE_EXTRA_CA_CERTS: '/a b/c=d.pem', NODE_OPTIONS: '--no-deprecation' };
    const helper = helperEnv(engine);
    expect(helper).toEqual({
      PATH: '/usr/bin',
      SLUICE_SPAWNER_HELD_NODE_EXTRA_CA_CERTS: '/a b/c=d.pem',
      SLUICE_SPAWNER_HELD_NODE_OPTIONS: '--no-deprecation',
    });
    expect(toolEnv(helper)).toEqual(engine);
    // The input is not changed.
    expect(engine.NODE_OPTIONS).toBe('--no-deprecation');
  });

  it('keeps an empty value empty and an absent one absent', () => {
    const engine = { NODE_EXTRA_CA_CERTS: '' };
    expect(helperEnv(engine)).toEqual({ SLUICE_SPAWNER_HELD_NODE_EXTRA_CA_CERTS: '' });
    expect(toolEnv(helperEnv(engine))).toEqual(engine);
    expect(toolEnv(helperEnv({}))).toEqual({});
  });

  it('gives back a carrier-like name the engine already had, and invents nothing', () => {
    const engine = {
      SLUICE_SPAWNER_HELD_NODE_OPTIONS: '--require /tmp/x.js',
      SLUICE_SPAWNER_HELD_FOO: 'bar',
      NODE_OPTIONS: '--no-warnings',
    };
    const helper = helperEnv(engine);
    // The helper runs without NODE_OPTIONS under any name it would act on.
    expect(helper.NODE_OPTIONS).toBeUndefined();
    expect(helper).toEqual({
      SLUICE_SPAWNER_HELD_SLUICE_SPAWNER_HELD_NODE_OPTIONS: '--require /tmp/x.js',
      SLUICE_SPAWNER_HELD_SLUICE_SPAWNER_HELD_FOO: 'bar',
      SLUICE_SPAWNER_HELD_NODE_OPTIONS: '--no-warnings',
    });
    expect(toolEnv(helper)).toEqual(engine);
    expect(HELPER_WITHOUT.map((n) => HELD_PREFIX + n)).toEqual([
      'SLUICE_SPAWNER_HELD_NODE_EXTRA_CA_CERTS',
      'SLUICE_SPAWNER_HELD_NODE_OPTIONS',
    ]);
  });
});
