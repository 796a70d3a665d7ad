/**
 * Part 2 of the demo: a scripted agent loop (no LLM; a deterministic planner) over real stdio MCP
 * servers. Step 1 advertises the tools and the "model" asks for two calls; the first one makes the
 * ops server change its catalog and send `notifications/tools/list_changed` mid-step, so the second
 * call is refused as STALE_CATALOG before anything reaches the server (its audit trail proves it).
 * Step 2 captures the new catalog and the call succeeds with a receipt.
 */
import { rmSync } from 'node:fs';
import { isStepbindError, toToolResult, type McpBinding } from '@stepbind/binding';
import { McpRuntime, type RuntimeEvent } from '@stepbind/runtime';
import {
  isProcessAlive,
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type ServerFixture,
} from '@stepbind/testkit';

const tool = (name: string, description: string, properties: Record<string, unknown> = {}) => ({
  name,
  description,
  inputSchema: { type: 'object', properties, additionalProperties: false },
  annotations: { readOnlyHint: name === 'plan' || name === 'status' },
});

const OPS: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: [tool('plan', 'Plan a release.'), tool('status', 'Show service status.')],
          nextCursor: 'p2',
        },
        { tools: [tool('deploy', 'Deploy a version.', { version: { type: 'string' } })] },
      ],
    },
    {
      pages: [
        {
          tools: [tool('plan', 'Plan a release.'), tool('status', 'Show service status.')],
          nextCursor: 'p2',
        },
        {
          tools: [
            tool('deploy', 'Deploy a version (now requires a ticket).', {
              version: { type: 'string' },
              ticket: { type: 'string' },
            }),
            tool('rollback', 'Roll back the last deploy.'),
          ],
        },
      ],
    },
  ],
  calls: {
    plan: { text: 'plan: deploy v2 (the deploy tool now needs a ticket)' },
    deploy: { text: 'deployed' },
  },
  // Planning changes the server's catalog and announces it, while the step is still running.
  triggers: [{ on: { method: 'tools/call', tool: 'plan' }, setGeneration: 1, notify: 'after' }],
};

/** Runs part 2 and returns the problems found (empty when everything behaved as expected). */
export async function agentLoopDemo(log: (line: string) => void): Promise<string[]> {
  const problems: string[] = [];
  const expect = (ok: boolean, what: string): void => {
    if (!ok) problems.push(what);
  };
  const opsAudit = tempAuditPath('demo-ops');
  // The demo reads the ops server's audit trail, then removes it (on every path).
  try {
    return await runAgentLoop(log, problems, expect, opsAudit);
  } finally {
    rmSync(opsAudit, { force: true });
  }
}

async function runAgentLoop(
  log: (line: string) => void,
  problems: string[],
  expect: (ok: boolean, what: string) => void,
  opsAudit: string,
): Promise<string[]> {
  const events: RuntimeEvent[] = [];
  const swapped: (() => void)[] = [];
  await using runtime = await McpRuntime.open(
    {
      mcpServers: {
        // This ops server is ours: we vouch for its annotations, so `ops__plan` (readOnlyHint) runs
        // without an approval. A third-party server's readOnlyHint would lower no bar.
        ops: {
          ...stdioServerParams({ scenario: 'fixture', fixture: OPS, auditPath: opsAudit }),
          trustAnnotations: true,
        },
        docs: stdioServerParams({ scenario: 'normal' }),
      },
    },
    {
      listChangedDebounceMs: 20,
      onEvent: (event) => {
        events.push(event);
        if (event.type === 'catalog-swapped') for (const wake of swapped.splice(0)) wake();
      },
    },
  );
  const pids = runtime.pids();
  log(`runtime open: ${pids.length} servers as child processes (pids ${pids.join(', ')})`);

  const showStep = (binding: McpBinding): void => {
    for (const s of binding.servers) {
      if (s.bound)
        log(
          `  ${s.name}: generation ${s.generation}, revision ${s.revision}, ${s.toolCount} tools, ${s.catalogState}`,
        );
    }
    log(`  tools advertised to the model: ${binding.tools.map((t) => t.name).join(', ')}`);
  };

  // ---- step 1
  log('');
  log('step 1: captureBinding()');
  const step1 = await runtime.captureBinding({ stepId: 'step-1' });
  showStep(step1);
  log('  planner: the model asked for ops__plan {} and ops__deploy {"version":"v2"}');
  const plan = step1.prepareCall('ops__plan');
  const deploy = step1.prepareCall('ops__deploy');
  const changed = new Promise<void>((resolve) => swapped.push(resolve));
  const planned = await plan.run({});
  log(`  ops__plan ran: ${JSON.stringify(planned.result.content)}`);
  await changed;
  const swap = events.find((e) => e.type === 'catalog-swapped');
  if (swap?.type === 'catalog-swapped') {
    log(
      `  ← notifications/tools/list_changed from ops: re-listed, catalog swapped to generation ${swap.generation}, revision ${swap.revision}`,
    );
  }
  let refused = false;
  try {
    await deploy.run(
      { version: 'v2' },
      { prepare: () => log('  (prepare hook ran: this must not happen)') },
    );
    log('  ops__deploy ran (this must not happen)');
  } catch (error) {
    refused = isStepbindError(error, 'STALE_CATALOG');
    log(`  ops__deploy refused: ${isStepbindError(error) ? error.code : String(error)}`);
    log(`  tool result for the model: ${JSON.stringify(toToolResult(error).content[0].text)}`);
  }
  expect(refused, 'the stale ops__deploy call was not refused with STALE_CATALOG');
  const trail = (await readAuditTrail(opsAudit)).filter(
    (e) => e.method === 'tools/list' || e.method === 'tools/call',
  );
  log(
    `  ops audit trail: ${trail.map((e) => (e.method === 'tools/call' ? `call(${e.tool})` : `list(${e.cursor === null ? '' : e.cursor})`)).join(' ')}`,
  );
  expect(
    !trail.some((e) => e.method === 'tools/call' && e.tool === 'deploy'),
    'deploy reached the server',
  );
  step1.release();

  // ---- step 2
  log('');
  log('step 2: captureBinding()');
  await using step2 = await runtime.captureBinding({ stepId: 'step-2' });
  showStep(step2);
  expect(
    step2.tools.some((t) => t.name === 'ops__rollback'),
    'step 2 does not see ops__rollback',
  );
  // The ops catalog is an unversioned observation (no revision token), so a destructive call needs an
  // approval by default: without one it is refused unsent; the prepare hook is where a human says yes.
  let unapproved = '';
  try {
    await step2.prepareCall('ops__deploy').run({ version: 'v2', ticket: 'CHG-1' });
  } catch (error) {
    unapproved = isStepbindError(error) ? error.code : String(error);
  }
  log(`  ops__deploy without an approval: ${unapproved || 'ran (this must not happen)'}`);
  expect(unapproved === 'APPROVAL_REQUIRED', 'the unapproved deploy was not refused');
  const again = await step2.prepareCall('ops__deploy').run(
    { version: 'v2', ticket: 'CHG-1' },
    {
      prepare: (ctx) => {
        log(
          `  approval asked: ${ctx.modelName} (${ctx.effectClass}, ${ctx.catalogState}) → approved by the operator`,
        );
        ctx.approve();
      },
    },
  );
  const r = again.receipt;
  log(`  ops__deploy ran: ${JSON.stringify(again.result.content)}`);
  log(
    `  receipt: step ${r.stepId}, ${r.server}/${r.tool} as ${r.modelName}, generation ${r.generation}, revision ${r.revision}, ${r.descriptorDigest.slice(0, 19)}…, ${r.timings.totalMs.toFixed(1)} ms`,
  );
  expect(r.revision === 2, `expected the deploy to run at revision 2, got ${r.revision}`);
  const calls = (await readAuditTrail(opsAudit))
    .filter((e) => e.method === 'tools/call')
    .map((e) => e.tool);
  log(`  ops tools/call received: ${calls.join(', ')}`);
  expect(
    calls.join() === 'plan,deploy',
    `expected ops to receive plan then deploy, got ${calls.join()}`,
  );

  await runtime.close();
  const alive = pids.filter((pid) => isProcessAlive(pid));
  log('');
  log(
    `runtime closed: ${alive.length === 0 ? 'no child process left' : `still alive: ${alive.join(', ')}`}`,
  );
  expect(alive.length === 0, 'child processes left after close()');
  return problems;
}
