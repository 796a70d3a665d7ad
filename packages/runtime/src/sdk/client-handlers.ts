/**
 * The SDK-facing half of `client-capabilities.ts`: installs stepbind's answers to the requests a
 * 2025-era server sends back (`roots/list`, `sampling/createMessage`, `elicitation/create`) on an
 * SDK client. Without a handler, sampling is refused with a JSON-RPC error that says why, and
 * elicitation is declined.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode as RpcErrorCode,
  ListRootsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import type { ClientHandlers } from '../client-capabilities.js';

/** Installs the request handlers on a client before it connects. */
export function installClientHandlers(
  client: Client,
  server: string,
  handlers: ClientHandlers,
): void {
  const roots = handlers.roots ?? [];
  client.setRequestHandler(ListRootsRequestSchema, () => ({
    roots: roots.map((r) => ({ ...r })),
  }));
  client.setRequestHandler(CreateMessageRequestSchema, async (request, extra) => {
    const handler = handlers.onSampling;
    if (handler === undefined) {
      throw new McpError(
        RpcErrorCode.InvalidRequest,
        'stepbind: this application does not answer sampling requests (no onSampling handler was given to McpRuntime.open)',
      );
    }
    const result = await handler(request.params, {
      server,
      signal: extra.signal,
    });
    return result;
  });
  client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
    const handler = handlers.onElicitation;
    if (handler === undefined) return { action: 'decline' };
    const result = await handler(request.params, {
      server,
      signal: extra.signal,
    });
    return result;
  });
}
