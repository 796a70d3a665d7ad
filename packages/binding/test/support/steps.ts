/**
 * Steps over in-memory catalogs for search and deferred-format tests: each server's tools become a
 * snapshot, the snapshots one view, the view a binding. Nothing here sends a call (the caller
 * throws), so a test that runs a tool belongs with the runtime's stdio tests.
 */
import {
  CatalogSlot,
  bindingViewOf,
  createBinding,
  createCatalogSnapshot,
  type BindingView,
  type BoundServer,
  type McpBinding,
  type McpToolDefinition,
} from '@stepbind/binding/internal';

/** The view of `servers` (server name → its tools, in order); `maxSchemaBytes` raises the budget. */
export function viewOf(
  servers: Readonly<Record<string, readonly McpToolDefinition[]>>,
  maxSchemaBytes?: number,
): BindingView {
  const bound = Object.entries(servers).map(([name, tools]): BoundServer => {
    const catalog = createCatalogSnapshot({
      identity: { name, transportDigest: 'sha256:t' },
      audience: 'default',
      policyEpoch: 0,
      revisionProof: 'unversioned',
      discoveryStartedAt: 0,
      pages: [tools],
      ...(maxSchemaBytes === undefined ? {} : { validation: { maxSchemaBytes } }),
    });
    return {
      name,
      slot: new CatalogSlot(name, catalog),
      catalog,
      revision: 1,
      caller: {
        closed: false,
        fault: undefined,
        callTool: () => Promise.reject(new Error('search tests send nothing')),
      },
      callTimeoutMs: 1_000,
      approval: 'none',
    };
  });
  return bindingViewOf(bound, []);
}

/** A step captured over `view` (or over the view of `servers`). */
export function stepOf(
  servers: BindingView | Readonly<Record<string, readonly McpToolDefinition[]>>,
): McpBinding {
  const view = 'byModelName' in servers ? (servers as BindingView) : viewOf(servers);
  return createBinding(view, {
    stepId: 'step-1',
    policy: { policyEpoch: 0, isRevoked: () => false, isApproved: () => false },
  });
}

/** A tool with `description` and string parameters named `params`. */
export function tool(
  name: string,
  description?: string,
  params: readonly string[] = [],
  extra: Partial<McpToolDefinition> = {},
): McpToolDefinition {
  return {
    name,
    ...(description === undefined ? {} : { description }),
    inputSchema: {
      type: 'object',
      properties: Object.fromEntries(params.map((p) => [p, { type: 'string' }])),
    },
    ...extra,
  };
}
