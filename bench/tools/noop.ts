/** The per-call overhead benchmark's tool: 100 bytes of single output (different each call, so no dedupe). */
import { defineTool, z } from '../../workers/tool.js';

export default defineTool({
  name: 'noop',
  description: 'Writes 100 bytes',
  args: z.object({ i: z.number().int() }),
  output: 'single',
  run({ i }, ctx) {
    ctx.stream().end(`${String(i).padStart(12, '0')}${'x'.repeat(87)}\n`);
    return undefined;
  },
});
