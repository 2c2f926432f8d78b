import { runConformance } from '../conformance/suite.js';
import { memoryDefinition } from './index.js';

runConformance(memoryDefinition as never, async () => ({ options: {}, cleanup: async () => undefined }));
