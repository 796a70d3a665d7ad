/**
 * @stepbind/runtime/internal: the runtime's connection layer, for `@stepbind/testkit`, the
 * benchmarks and the runtime's own tests. Not a stable API: the connection classes, the
 * connectors and the SDK error mapping change with the runtime. Applications use
 * `@stepbind/runtime` (whose `McpRuntime` owns every connection) and `discoverTools`.
 * @packageDocumentation
 */
export { connectServer, connectTransport } from './connect.js';
export type { ConnectOptions, ConnectTransportOptions } from './connect.js';
export { mapSdkError, SdkConnection } from './sdk/sdk-connection.js';
export { ModernConnection } from './era/modern.js';
export { CLIENT_CAPABILITIES, CLIENT_INFO } from './client-capabilities.js';
export { SERVER_AUTH_FACTORY } from './server/authorizers.js';
export type { ServerAuthFactory } from './server/authorizers.js';
export { OPTIONS_SCHEMAS, renderOptionsReference } from './options-schema.js';
