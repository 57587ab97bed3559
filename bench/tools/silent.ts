/** The overhead benchmark's attribution tool: a call that writes nothing (so nothing is published). */
import { defineTool, z } from '../../workers/tool.js';

export default defineTool({
  name: 'silent',
  description: 'Writes nothing',
  args: z.object({ i: z.number().int() }),
  output: 'single',
  run() {
    return undefined;
  },
});
