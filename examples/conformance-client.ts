/**
 * The client the official MCP conformance suite (`@modelcontextprotocol/conformance`) drives:
 * `conformance client --command "<this>" --scenario NAME` starts a scenario server and runs this
 * script with the server's URL as its last argument and `MCP_CONFORMANCE_SCENARIO` set.
 *
 * Everything goes through stepbind as an application would use it: `McpRuntime.open` on a one-server
 * Streamable HTTP configuration (discovery, validation, a published catalog), `captureBinding()` for
 * a step, `prepareCall(...).run(...)` for each call, and the application's elicitation handler.
 * Nothing here speaks the protocol itself. Exits non-zero when stepbind fails.
 *
 * Run by `pnpm conformance` (scripts/conformance.ts), not by hand.
 */
import {
  McpRuntime,
  MemoryTokenStore,
  toStrictSchema,
  toToolResult,
  type McpBinding,
} from '@stepbind/runtime';

const url = process.argv.at(-1);
const scenario = process.env['MCP_CONFORMANCE_SCENARIO'] ?? '';
if (url === undefined || !/^https?:\/\//.test(url)) {
  process.stderr.write('usage: conformance-client <server-url> (MCP_CONFORMANCE_SCENARIO set)\n');
  process.exit(2);
}

/** Arguments for the tools the scenario servers offer (by raw tool name). */
const ARGUMENTS: Readonly<Record<string, Readonly<Record<string, unknown>>>> = {
  add_numbers: { a: 5, b: 3 },
  valid_tool: { region: 'us-west1' },
  ...contextArguments(),
};

/** The arguments a scenario hands its client in `MCP_CONFORMANCE_CONTEXT` (`toolCalls`). */
function contextArguments(): Record<string, Readonly<Record<string, unknown>>> {
  try {
    const context = JSON.parse(process.env['MCP_CONFORMANCE_CONTEXT'] ?? '{}') as {
      toolCalls?: { name?: unknown; arguments?: unknown }[];
    };
    return Object.fromEntries(
      (context.toolCalls ?? []).flatMap((c) =>
        typeof c.name === 'string' && typeof c.arguments === 'object' && c.arguments !== null
          ? [[c.name, c.arguments as Record<string, unknown>]]
          : [],
      ),
    );
  } catch {
    return {};
  }
}

/** Which tools each scenario expects to be called; `undefined`: every tool listed. */
const CALLS: Readonly<Record<string, readonly string[]>> = {
  initialize: [],
  // The echo tool takes back the focal tool's inputSchema exactly as stepbind hands it to a model.
  'json-schema-2020-12-preservation': ['json_schema_echo'],
};

/** The tool whose schema `json_schema_echo` takes back (SEP-1613 / SEP-2106). */
const ECHOED_TOOL = 'json_schema_2020_12_tool';

/**
 * The `auth` block of an `auth/*` scenario: OAuth with what the scenario hands its client in
 * `MCP_CONFORMANCE_CONTEXT` (a pre-registered `client_id` and `client_secret`, or a
 * `private_key_pem` and its `signing_algorithm`), client credentials for the headless scenarios,
 * and the harness's Client ID Metadata Document URL (used where the server supports CIMD).
 */
function authBlock(): Record<string, unknown> | undefined {
  if (!scenario.startsWith('auth/')) return undefined;
  let context: Record<string, unknown> = {};
  try {
    context = JSON.parse(process.env['MCP_CONFORMANCE_CONTEXT'] ?? '{}') as Record<string, unknown>;
  } catch {
    context = {};
  }
  const text = (key: string): string | undefined =>
    typeof context[key] === 'string' ? context[key] : undefined;
  const clientId = text('client_id');
  const clientSecret = text('client_secret');
  const privateKey = text('private_key_pem');
  const privateKeyAlg = text('signing_algorithm');
  return {
    type: 'oauth',
    ...(scenario.startsWith('auth/client-credentials') ? { grant: 'client_credentials' } : {}),
    // A pre-registered client id, else the metadata document's URL as the client id (CIMD).
    ...(clientId === undefined
      ? { clientMetadataUrl: 'https://conformance-test.local/client-metadata.json' }
      : { clientId }),
    ...(clientSecret === undefined ? {} : { clientSecret }),
    ...(privateKey === undefined ? {} : { privateKey }),
    ...(privateKeyAlg === undefined ? {} : { privateKeyAlg }),
  };
}

/**
 * The application's `authorize` hook, as a browser would: follow the authorization URL and hand
 * back where the authorization server redirects (the conformance server redirects at once).
 */
async function followRedirect({ authorizationUrl }: { authorizationUrl: URL }): Promise<string> {
  const response = await fetch(authorizationUrl, { redirect: 'manual' });
  await response.body?.cancel();
  const location = response.headers.get('location');
  if (location === null) throw new Error(`the authorization URL answered ${response.status}`);
  return new URL(location, authorizationUrl).href;
}

const auth = authBlock();
const runtime = await McpRuntime.open(
  {
    mcpServers: {
      conformance: {
        type: 'http',
        url,
        required: true,
        approval: 'none',
        ...(auth === undefined ? {} : { auth }),
      },
    },
  },
  {
    // Logins live in memory only: each scenario is a fresh authorization server.
    ...(auth === undefined
      ? {}
      : { authorize: followRedirect, tokenStore: new MemoryTokenStore() }),
    // The application's answer to a form: accept, leaving every field to the schema's defaults
    // (stepbind declares `applyDefaults`, so the client fills them in; SEP-1034).
    onElicitation: () => Promise.resolve({ action: 'accept', content: {} }),
    onEvent: (event) => {
      if (event.type === 'connection-error' || event.type === 'session-lost') {
        process.stderr.write(`stepbind event: ${JSON.stringify(event)}\n`);
      }
    },
  },
);
let failed = false;
try {
  await using step: McpBinding = await runtime.captureBinding();
  const tools = step.tools.map((t) => t.name);
  process.stdout.write(`scenario ${scenario}: ${tools.length} tools: ${tools.join(', ')}\n`);
  const wanted = CALLS[scenario];
  const echoed = step.tools.find((t) => step.prepareCall(t.name).tool === ECHOED_TOOL);
  for (const tool of step.tools) {
    const call = step.prepareCall(tool.name);
    const raw = call.tool;
    if (wanted !== undefined && !wanted.includes(raw)) continue;
    // As an application with an OpenAI-style strict model would: the model saw the strict form,
    // where an optional parameter is nullable, so its `null` ("not given") is restored away before
    // stepbind validates and sends (http-custom-headers sends `verbose: null` that way).
    const strict = toStrictSchema(tool.inputSchema);
    const given =
      raw === 'json_schema_echo' && echoed !== undefined
        ? { schema: echoed.inputSchema }
        : (ARGUMENTS[raw] ?? {});
    try {
      const { result, receipt } = await call.run(strict.strict ? strict.restore(given) : given);
      process.stdout.write(
        `called ${raw}: ${JSON.stringify(result.content)} (receipt ${JSON.stringify(receipt)})\n`,
      );
    } catch (error) {
      failed = true;
      process.stdout.write(`call ${raw} failed: ${JSON.stringify(toToolResult(error))}\n`);
    }
  }
  process.stdout.write(`status: ${JSON.stringify(runtime.status().servers)}\n`);
} finally {
  await runtime.close();
}
process.exitCode = failed ? 1 : 0;
