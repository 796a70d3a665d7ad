/**
 * The bare MCP SDK v1 client, the baseline of every benchmark ratio.
 *
 * The workspace root does not depend on `@modelcontextprotocol/sdk` (only the packages do), so the
 * benchmarks reach the exact copy `@stepbind/runtime` resolves through its package directory. Node
 * follows the pnpm symlink to the same real file, so these are the very classes stepbind wraps.
 */
export { Client } from '../packages/runtime/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js';
export { StdioClientTransport } from '../packages/runtime/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js';
export { InMemoryTransport } from '../packages/runtime/node_modules/@modelcontextprotocol/sdk/dist/esm/inMemory.js';
