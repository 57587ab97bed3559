/**
 * The spawn helper's own environment (workers/helper-env.ts): it runs
 * without the Node variables it does not need; nothing else is changed.
 */
import { describe, expect, it } from 'vitest';
import { helperEnv } from '../../workers/helper-env.js';

describe('the spawn helper environment', () => {
  it('is the engine’s without NODE_EXTRA_CA_CERTS and NODE_OPTIONS, the input unchanged', () => {
    const engine = {
      PATH: '/usr/bin',
      NODE_EXTRA_CA_CERTS: '/a b/c=d.pem',
      NODE_OPTIONS: '--no-deprecation',
      'a-b': 'odd name',
      EMPTY: '',
    };
    expect(helperEnv(engine)).toEqual({ PATH: '/usr/bin', 'a-b': 'odd name', EMPTY: '' });
    expect(engine.NODE_OPTIONS).toBe('--no-deprecation');
    expect(helperEnv({})).toEqual({});
  });
});
