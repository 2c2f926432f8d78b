import { runConformance } from '../conformance/suite.js';
import { parseOptions } from '../options.js';
import type { DriverDefinition } from '../types.js';
import { templateDefinition } from './index.js';

const def = templateDefinition as unknown as DriverDefinition;
runConformance(def, async () => ({ options: parseOptions(def, { max_file_size: 8 * 1024 * 1024 }), cleanup: async () => undefined }));
