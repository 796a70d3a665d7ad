/**
 * The configuration file as the CLI reads it: the runtime's own loader (`../config-file.ts`),
 * re-exported so the commands keep importing it from here.
 */
export { loadConfigFile, MAX_CONFIG_BYTES } from '../config-file.js';
export type { LoadConfigFileOptions } from '../config-file.js';
