/**
 * The schema of every options bag of the runtime (DESIGN §17.1): one zod schema per interface,
 * keyed exactly like it (the interface's file calls `sameKeys`, which fails to compile when a key
 * is added to one and not the other), checked at run time by `checkOptions` and rendered into `docs/options.md`.
 *
 * @packageDocumentation
 */
import {
  abortSignal,
  descriptionOf,
  fn,
  millis,
  problemIssue,
  runOptionsSchema,
  withMethods,
  type JournalStore,
} from '@stepbind/binding/internal';
import * as z from 'zod/v4';

// The interfaces these schemas mirror live with their functions; each file asserts at compile
// time (`sameKeys`) that its interface and its schema have the same keys. This file imports none
// of them, so no import cycle forms.

const JOURNAL_STORE_METHODS = [
  'get',
  'insert',
  'update',
  'appendReceipt',
  'listRecords',
  'readReceipts',
  'anchor',
  'prune',
  'close',
] as const;
const TOKEN_STORE_METHODS = [
  'get',
  'put',
  'delete',
  'list',
  'getRegistration',
  'putRegistration',
  'withLock',
] as const;

const positiveMs = z
  .number()
  .positive()
  .describe('a number of milliseconds greater than 0 (finite)');

/** `ReconnectOptions`: the backoff of the background reconnects. */
export const reconnectOptionsSchema = z.strictObject({
  initialDelayMs: millis(0).optional(),
  maxDelayMs: millis(0).optional(),
  maxAttempts: z
    .number()
    .int()
    .min(0)
    .describe('an integer from 0 (no background reconnects) up')
    .optional(),
});

/**
 * `RuntimeJournalOptions`: `{ path, synchronous?, busyTimeoutMs?, driver? }` or `{ store }`, both with the
 * retention tuning. Exactly one of `path` and `store`; the SQLite keys only with `path`.
 */
export const journalOptionsSchema = z
  .strictObject({
    path: z.string().min(1).describe('the journal file path (a non-empty string)').optional(),
    synchronous: z
      .enum(['full', 'normal'])
      .describe('"full" (fsync before each send) or "normal"')
      .optional(),
    busyTimeoutMs: millis(0).optional(),
    driver: z
      .enum(['auto', 'node:sqlite', 'better-sqlite3'])
      .describe('"auto", "node:sqlite" or "better-sqlite3"')
      .optional(),
    store: withMethods<JournalStore>('JournalStore', JOURNAL_STORE_METHODS).optional(),
    retentionMs: positiveMs.optional(),
    inProgressTtlMs: positiveMs.optional(),
  })
  .superRefine((bag, ctx) => {
    if (bag.path === undefined && bag.store === undefined) {
      ctx.addIssue(
        problemIssue(
          [],
          'needs "path" (the durable SQLite journal file) or "store" (a JournalStore)',
        ),
      );
    }
    if (bag.path !== undefined && bag.store !== undefined) {
      ctx.addIssue(problemIssue(['store'], 'cannot be given with "path": choose one journal'));
    }
    if (bag.store !== undefined) {
      for (const key of ['synchronous', 'busyTimeoutMs', 'driver'] as const) {
        if (bag[key] !== undefined) {
          ctx.addIssue(
            problemIssue([key], 'applies only to a "path" journal (the store given tunes its own)'),
          );
        }
      }
    }
  });

/** `FleetOptions`: where the fleet store is, plus tuning. */
export const fleetOptionsSchema = z.strictObject({
  url: z
    .string()
    .regex(/^postgres(ql)?:\/\//)
    .describe('a postgres:// or postgresql:// URL'),
  schema: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,47}$/)
    .describe('a schema name matching /^[a-z_][a-z0-9_]{0,47}$/')
    .optional(),
  connectTimeoutMs: millis(1).optional(),
  statementTimeoutMs: millis(1).optional(),
  queryTimeoutMs: millis(1).optional(),
  idleInTransactionTimeoutMs: millis(1).optional(),
  keepAliveInitialDelayMs: millis(1).optional(),
  closeGraceMs: millis(1).optional(),
  maxStalenessMs: millis(1).optional(),
  maxAttempts: z.number().int().min(1).describe('an integer from 1 up').optional(),
  retryDelayMs: millis(0).optional(),
  poolSize: z.number().int().min(1).describe('an integer from 1 up').optional(),
  heartbeatMs: millis(1).optional(),
  reconnect: z
    .strictObject({ initialMs: millis(0).optional(), maxMs: millis(0).optional() })
    .describe('an object { initialMs?, maxMs? } (milliseconds)')
    .optional(),
  now: fn<() => number>('() => epoch milliseconds').optional(),
  onEvent: fn('(event) => void').optional(),
  owner: z.string().min(1).describe('a non-empty string').optional(),
});

/** The `store` option: a `postgres://` URL or `FleetOptions`. */
export const storeOptionSchema = z
  .union([
    z
      .string()
      .regex(/^postgres(ql)?:\/\//)
      .describe('a postgres:// or postgresql:// URL'),
    fleetOptionsSchema,
  ])
  .describe('a postgres:// URL or FleetOptions ({ url, schema?, ...tuning })');

/** The `validation` option: schema validation limits for every catalog. */
export const validationOptionsSchema = z.strictObject({
  maxSchemaBytes: z.number().int().min(1).describe('an integer from 1 up (bytes)').optional(),
  allowedDialects: z
    .array(z.enum(['2020-12', 'draft-07']).describe('"2020-12" or "draft-07"'))
    .describe('an array of "2020-12" and "draft-07"')
    .optional(),
  compile: z.enum(['lazy', 'eager']).describe('"lazy" or "eager"').optional(),
});

/** The `cache` option: `{ path }` or `false`. */
export const cacheOptionSchema = z
  .union([
    z.strictObject({
      path: z.string().min(1).describe('the cache file path (a non-empty string)'),
    }),
    z.literal(false),
  ])
  .describe('{ path } (the catalog cache file) or false (no cache)');

/** `McpRuntimeOptions`: every option of `McpRuntime.open`. */
export const runtimeOptionsSchema = z.strictObject({
  policyEpoch: z.number().int().min(0).describe('an integer from 0 up').optional(),
  approval: z
    .enum(['none', 'unproven-writes', 'all-writes'])
    .describe('"none", "unproven-writes" or "all-writes"')
    .optional(),
  optionalGraceMs: millis(0).optional(),
  listChangedDebounceMs: millis(0).optional(),
  validation: validationOptionsSchema.describe('ValidationOptions (an object)').optional(),
  connect: fn('(name, config, { signal }) => Promise<Connection>').optional(),
  reconnect: reconnectOptionsSchema.describe('ReconnectOptions (an object)').optional(),
  onEvent: fn('(event) => void').optional(),
  onSampling: fn('(request, extra) => result').optional(),
  onElicitation: fn('(request, extra) => result').optional(),
  journal: journalOptionsSchema
    .describe('RuntimeJournalOptions ({ path, ... } or { store, ... })')
    .optional(),
  clock: withMethods('RuntimeClock', ['setTimeout', 'clearTimeout', 'now']).optional(),
  store: storeOptionSchema.optional(),
  authorize: fn('({ server, authorizationUrl, redirectUri, signal }) => callback URL').optional(),
  tokenStore: withMethods('TokenStore', TOKEN_STORE_METHODS).optional(),
  redirectUri: z
    .string()
    .refine(isRedirectUri)
    .describe(
      'an absolute http(s) URL without a fragment or port 0, such as http://127.0.0.1:33418/callback',
    )
    .optional(),
  cache: cacheOptionSchema.optional(),
  signal: abortSignal.optional(),
});

/** `CaptureOptions`: the options of `McpRuntime.captureBinding`. */
export const captureOptionsSchema = z.strictObject({
  requiredServers: z
    .array(z.string().min(1).describe('a server name (a non-empty string)'))
    .describe('an array of server names')
    .optional(),
  signal: abortSignal.optional(),
  stepId: z.string().min(1).describe('a non-empty string').optional(),
});

/** The options every framework adapter takes (`AdapterCallOptions`), in this order. */
const adapterCallShape = {
  prepare: fn('(context) => void | Promise<void>').optional(),
  timeoutMs: millis(1).optional(),
  onCall: fn('(event) => void').optional(),
  stepKey: z
    .string()
    .min(1)
    .max(256)
    // eslint-disable-next-line no-control-regex
    .regex(/^[^\u0000-\u001f]*$/)
    .describe('a string of 1 to 256 characters without control characters')
    .optional(),
  idempotencyKeys: z.boolean().describe('a boolean').optional(),
};

/** `AiSdkToolsOptions`: the options of `stepToAiSdkTools`. */
export const aiSdkToolsOptionsSchema = z.strictObject({
  ...adapterCallShape,
  approvals: z.enum(['ai-sdk', 'prepare']).describe('"ai-sdk" or "prepare"').optional(),
});

/** `OpenAiAgentsToolsOptions`: the options of `stepToAgentTools`. */
export const openAiAgentsToolsOptionsSchema = z.strictObject({
  ...adapterCallShape,
  approvals: z.enum(['agents', 'prepare']).describe('"agents" or "prepare"').optional(),
});

/** `LangChainToolsOptions`: the options of `stepToLangChainTools`. */
export const langChainToolsOptionsSchema = z.strictObject(adapterCallShape);

/** `OpenAiAgentsServerOptions`: the options of `stepbindServer`. */
export const openAiAgentsServerOptionsSchema = z.strictObject({
  name: z.string().min(1).describe('a non-empty string').optional(),
  prepare: fn('(context) => void | Promise<void>').optional(),
  timeoutMs: millis(1).optional(),
  onCall: fn('(event) => void').optional(),
  toolFilter: z
    .union([
      fn('(context, tool) => Promise<boolean>'),
      z.strictObject({
        allowedToolNames: z.array(z.string()).optional(),
        blockedToolNames: z.array(z.string()).optional(),
      }),
    ])
    .describe(
      'a function (context, tool) => Promise<boolean> or { allowedToolNames?, blockedToolNames? }',
    )
    .optional(),
});

/** `SqliteJournalOptions`: the options of `openSqliteJournal`. */
export const sqliteJournalOptionsSchema = z.strictObject({
  path: z.string().min(1).describe('the journal file path (a non-empty string)'),
  synchronous: z
    .enum(['full', 'normal'])
    .describe('"full" (fsync before each send) or "normal"')
    .optional(),
  busyTimeoutMs: millis(0).optional(),
  driver: z
    .enum(['auto', 'node:sqlite', 'better-sqlite3'])
    .describe('"auto", "node:sqlite" or "better-sqlite3"')
    .optional(),
  clock: withMethods('RuntimeClock', ['setTimeout', 'clearTimeout', 'now']).optional(),
  readOnly: z.boolean().describe('a boolean').optional(),
});

/**
 * Every schema with the function whose options it checks and the interface it mirrors, in the
 * order of the options reference (`docs/options.md`).
 */
export const OPTIONS_SCHEMAS: readonly {
  readonly name: string;
  readonly fn: string;
  readonly schema: z.ZodType;
}[] = [
  { name: 'McpRuntimeOptions', fn: 'McpRuntime.open', schema: runtimeOptionsSchema },
  { name: 'RuntimeJournalOptions', fn: 'McpRuntime.open (journal)', schema: journalOptionsSchema },
  { name: 'FleetOptions', fn: 'McpRuntime.open (store), attachFleet', schema: fleetOptionsSchema },
  { name: 'ReconnectOptions', fn: 'McpRuntime.open (reconnect)', schema: reconnectOptionsSchema },
  {
    name: 'ValidationOptions',
    fn: 'McpRuntime.open (validation)',
    schema: validationOptionsSchema,
  },
  { name: 'CaptureOptions', fn: 'McpRuntime.captureBinding', schema: captureOptionsSchema },
  { name: 'RunOptions', fn: 'PreparedCall.run', schema: runOptionsSchema },
  { name: 'AiSdkToolsOptions', fn: 'stepToAiSdkTools', schema: aiSdkToolsOptionsSchema },
  { name: 'SqliteJournalOptions', fn: 'openSqliteJournal', schema: sqliteJournalOptionsSchema },
  {
    name: 'OpenAiAgentsServerOptions',
    fn: 'stepbindServer',
    schema: openAiAgentsServerOptionsSchema,
  },
  {
    name: 'OpenAiAgentsToolsOptions',
    fn: 'stepToAgentTools',
    schema: openAiAgentsToolsOptionsSchema,
  },
  {
    name: 'LangChainToolsOptions',
    fn: 'stepToLangChainTools',
    schema: langChainToolsOptionsSchema,
  },
];

/** An absolute http(s) URL without a fragment; port 0 would send the login back to nobody. */
function isRedirectUri(value: string): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  return (
    (url.protocol === 'http:' || url.protocol === 'https:') && url.hash === '' && url.port !== '0'
  );
}

/**
 * The options reference (`docs/options.md`), rendered from {@link OPTIONS_SCHEMAS}: one table per
 * bag with each key, whether it is required and what it must be. `npx tsx scripts/options-doc.ts` writes it
 * (formatted by Prettier); a test fails when the file is stale.
 */
export function renderOptionsReference(): string {
  const lines = [
    '# Options reference',
    '',
    '<!-- Generated from packages/runtime/src/options-schema.ts by scripts/options-doc.ts; do not edit. -->',
    '',
    'Every options bag is checked at run time: an unknown key or a wrong value is `INVALID_OPTIONS`',
    'naming its path, the allowed keys and a did-you-mean (DESIGN §17.1). Defaults and meanings are',
    'in the TSDoc of each interface.',
  ];
  for (const { name, fn: where, schema } of OPTIONS_SCHEMAS) {
    lines.push('', `## ${name}`, '', `Checked by \`${where}\`.`, '');
    lines.push('| Option | Required | Must be |', '| --- | --- | --- |');
    const shape = (schema as z.ZodObject).shape as Record<string, z.ZodType>;
    for (const [key, field] of Object.entries(shape)) {
      const required = !(field instanceof z.ZodOptional);
      const text = (descriptionOf(field) ?? 'an object').replace(/[|<>*_]/g, (c) => `\\${c}`);
      lines.push(`| \`${key}\` | ${required ? 'yes' : 'no'} | ${text} |`);
    }
  }
  return `${lines.join('\n')}\n`;
}
