/**
 * bench/search: tool search and deferred tools (DESIGN §19.4), in process, no server.
 *
 * - Tokens of the tool definitions in the first request, 50 servers × 40 tools, counted with
 *   gpt-tokenizer (o200k): every tool (`toXTools`) versus the deferred format's up-front tools
 *   (`toXDeferredTools`, no `alwaysLoaded`, no budget), per provider shape. Anthropic's request
 *   still carries the deferred definitions (`defer_loading: true`, not loaded into the model's
 *   context): its row counts what is loaded, and a second row the whole `tools` array.
 *   Target: deferred / all ≤ 0.10 (90 % fewer).
 * - Search latency over 5,000 tools (125 servers × 40), p50 and p99 of single searches of
 *   realistic requests after a warm-up. Target: p99 < 2 ms.
 * - Index build time (the first search of a fresh view) and the heap the index retains per tool.
 *
 * Run alone: `npx tsx bench/search.ts [--strict]`.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  CatalogSlot,
  bindingViewOf,
  createBinding,
  createCatalogSnapshot,
  searchTools,
  toAnthropicDeferredTools,
  toAnthropicTools,
  toGeminiDeferredTools,
  toGeminiFunctionDeclarations,
  toOpenAIChatDeferredTools,
  toOpenAIChatTools,
  toOpenAIResponsesDeferredTools,
  toOpenAIResponsesTools,
  type BindingView,
  type BoundServer,
  type McpBinding,
  type McpToolDefinition,
} from '@stepbind/binding/internal';
import { countTokens } from 'gpt-tokenizer';
import { breathe, isMain, row, runStandalone, type BenchRow } from './support.js';

const SUITE = 'search';

const DOMAINS = [
  'issue',
  'message',
  'channel',
  'event',
  'calendar',
  'table',
  'query',
  'bucket',
  'object',
  'contact',
  'deal',
  'invoice',
  'payment',
  'customer',
  'order',
  'product',
  'ticket',
  'document',
  'folder',
  'file',
  'page',
  'comment',
  'user',
  'team',
  'project',
  'build',
  'deployment',
  'alert',
  'metric',
  'log',
  'secret',
  'certificate',
  'domain',
  'record',
  'image',
  'video',
  'playlist',
  'repository',
  'branch',
  'release',
  'note',
  'task',
  'reminder',
  'form',
  'survey',
  'campaign',
  'segment',
  'report',
  'dashboard',
  'workflow',
] as const;
const VERBS = [
  ['create', 'Create a new'],
  ['get', 'Get one'],
  ['list', 'List every'],
  ['update', 'Update an existing'],
  ['delete', 'Permanently delete a'],
  ['search', 'Search by text for a'],
  ['archive', 'Archive a'],
  ['restore', 'Restore an archived'],
  ['share', 'Share with a teammate a'],
  ['export', 'Export to CSV each'],
  ['import', 'Import from a file each'],
  ['assign', 'Assign an owner to a'],
  ['tag', 'Add labels to a'],
  ['move', 'Move to another folder a'],
  ['copy', 'Duplicate a'],
  ['watch', 'Get notified about changes to a'],
  ['lock', 'Prevent edits to a'],
  ['unlock', 'Allow edits again to a'],
  ['count', 'Count how many of each'],
  ['summarize', 'Summarize the recent activity of a'],
] as const;
const QUALIFIERS = ['', 'draft', 'shared'] as const;

/** The tools of server `s` of a fleet: 40 realistic, overlapping tools from the domain lists. */
function serverTools(s: number, perServer: number): McpToolDefinition[] {
  const domain = DOMAINS[s % DOMAINS.length] as string;
  const qualifier = QUALIFIERS[Math.floor(s / DOMAINS.length) % QUALIFIERS.length] as string;
  const noun = qualifier === '' ? domain : `${qualifier}_${domain}`;
  const tools: McpToolDefinition[] = [];
  for (let t = 0; t < perServer; t++) {
    const [verb, phrase] = VERBS[t % VERBS.length] as readonly [string, string];
    const variant = t < VERBS.length ? '' : '_batch';
    tools.push({
      name: `${verb}_${noun}${variant}`,
      description: `${phrase} ${noun.replace('_', ' ')}${variant === '' ? '' : ' (many at once, up to 100)'} in the workspace. Returns the ${domain} id, its title, owner and the time it last changed.`,
      inputSchema: {
        type: 'object',
        properties: {
          [`${domain}Id`]: { type: 'string', description: `The id of the ${domain}.` },
          workspace: { type: 'string', description: 'Workspace slug.' },
          limit: { type: 'integer', minimum: 1, maximum: 100, description: 'Most items returned.' },
          ...(t % 3 === 0
            ? {
                filter: {
                  type: 'object',
                  properties: {
                    owner: { type: 'string' },
                    since: { type: 'string', format: 'date-time' },
                  },
                },
              }
            : {}),
        },
        required: [`${domain}Id`],
      },
    });
  }
  return tools;
}

/** A step over `servers` × `perServer` tools, built in process (nothing is ever called). */
function fleetView(servers: number, perServer: number): BindingView {
  const bound: BoundServer[] = [];
  for (let s = 0; s < servers; s++) {
    const name = `srv${String(s).padStart(3, '0')}_${DOMAINS[s % DOMAINS.length] as string}`;
    const catalog = createCatalogSnapshot({
      identity: { name, transportDigest: 'sha256:bench' },
      audience: 'default',
      policyEpoch: 0,
      revisionProof: 'unversioned',
      discoveryStartedAt: 0,
      pages: [serverTools(s, perServer)],
    });
    bound.push({
      name,
      slot: new CatalogSlot(name, catalog),
      catalog,
      revision: 1,
      caller: { closed: false, fault: undefined, callTool: () => Promise.reject(new Error('no')) },
      callTimeoutMs: 1_000,
      approval: 'none',
    });
  }
  return bindingViewOf(bound, []);
}

const stepOf = (view: BindingView): McpBinding =>
  createBinding(view, {
    stepId: 'bench',
    policy: { policyEpoch: 0, isRevoked: () => false, isApproved: () => false },
  });

const tokens = (value: unknown): number => countTokens(JSON.stringify(value));

const REQUESTS = [
  'create a new invoice for the customer',
  'find the message about the budget',
  'delete the old deployment',
  'export every order to csv',
  'who owns this ticket',
  'archive the shared document',
  'share the dashboard with a teammate',
  'restore the archived campaign',
  'count the alerts since monday',
  'move the file to another folder',
  'summarize recent activity on the repository',
  'lock the draft report',
];

/** The heap plus ArrayBuffer memory (the index keeps its postings in typed arrays). */
function heapAndBuffers(): number {
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

function gcFunction(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** Options of {@link runSearchBench}. */
export interface SearchBenchOptions {
  /** Searches timed over the 5,000-tool step. @default 5000 */
  readonly searches?: number;
  /** Fresh views whose index build is timed. @default 5 */
  readonly builds?: number;
}

/** Runs the suite and returns its rows. */
export async function runSearchBench(options: SearchBenchOptions = {}): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];

  // Tokens, 50 × 40.
  const step = stepOf(fleetView(50, 40));
  const deferredOptions = { countTokens };
  const shapes: [string, number, number][] = [
    [
      'OpenAI Responses (tool_search + namespaces)',
      tokens(toOpenAIResponsesTools(step.tools).tools),
      tokens(toOpenAIResponsesDeferredTools(step, deferredOptions).tools),
    ],
    [
      'OpenAI Chat Completions (search_tools)',
      tokens(toOpenAIChatTools(step.tools).tools),
      tokens(toOpenAIChatDeferredTools(step, deferredOptions).tools),
    ],
    [
      'Gemini (search_tools)',
      tokens(toGeminiFunctionDeclarations(step.tools).tools),
      tokens(toGeminiDeferredTools(step, deferredOptions).tools),
    ],
  ];
  const anthropic = toAnthropicDeferredTools(step, deferredOptions);
  const anthropicAll = tokens(toAnthropicTools(step.tools).tools);
  shapes.push([
    'Anthropic (defer_loading, loaded into context)',
    anthropicAll,
    tokens(anthropic.tools.filter((t) => t.defer_loading !== true)),
  ]);
  for (const [shape, all, deferred] of shapes) {
    rows.push(row(SUITE, `tokens, all 2,000 tools: ${shape}`, 'tok', [all]));
    rows.push(
      row(SUITE, `tokens deferred / all: ${shape}`, '×', [deferred / all], {
        target: { op: '<=', value: 0.1 },
        note: `${shape}: ${deferred} tokens up front vs ${all} (50 servers × 40 tools, gpt-tokenizer o200k, JSON of the tools array).`,
      }),
    );
  }
  rows.push(
    row(SUITE, 'tokens, Anthropic tools array on the wire (deferred included)', 'tok', [
      tokens(anthropic.tools),
    ]),
  );

  // Index build and heap, 5,000 tools.
  const gc = gcFunction();
  const buildMs: number[] = [];
  const heapPerTool: number[] = [];
  const builds = options.builds ?? 5;
  let view = fleetView(125, 40);
  for (let b = 0; b < builds; b++) {
    view = fleetView(125, 40);
    gc();
    const before = heapAndBuffers();
    const t0 = performance.now();
    searchTools(view, 'warm');
    buildMs.push(performance.now() - t0);
    gc();
    heapPerTool.push((heapAndBuffers() - before) / view.tools.length);
    await breathe();
  }
  rows.push(row(SUITE, 'index build, 5,000 tools (first search of a view)', 'ms', buildMs));
  rows.push(row(SUITE, 'index heap and buffers per tool', 'bytes', heapPerTool));

  // Latency, 5,000 tools.
  const big = stepOf(view);
  const searches = options.searches ?? 5000;
  for (let i = 0; i < 500; i++) big.search(REQUESTS[i % REQUESTS.length] as string);
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < searches; i++) {
    const request = REQUESTS[i % REQUESTS.length] as string;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    big.search(request, { limit: 10 });
    wall.push((performance.now() - t0) * 1000);
    const c = process.cpuUsage(c0);
    cpu.push(c.user + c.system);
    if (i % 1000 === 999) await breathe();
  }
  const note = `${searches} searches of ${REQUESTS.length} realistic requests, limit 10, after 500 warm-up searches. Wall time includes preemption by other processes on a shared machine; CPU time (process.cpuUsage, all threads, so GC too) does not.`;
  for (const [what, sample] of [
    ['wall', wall],
    ['CPU', cpu],
  ] as const) {
    const sorted = [...sample].sort((a, b) => a - b);
    const p = (q: number): number =>
      sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
    rows.push(row(SUITE, `search p50 (${what}), 5,000 tools`, 'µs', [p(0.5)]));
    rows.push(
      row(SUITE, `search p99 (${what}), 5,000 tools`, 'µs', [p(0.99)], {
        target: { op: '<=', value: 2000 },
        ...(what === 'wall' ? { note } : {}),
      }),
    );
  }
  return rows;
}

if (isMain(import.meta.url)) {
  await runStandalone('bench/search', () => runSearchBench());
}
