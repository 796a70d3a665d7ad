import fc from 'fast-check';
import { Capture } from './commands/capture.js';
import { EditNextCatalog } from './commands/edit-next-catalog.js';
import {
  arbPages,
  arbModelIndex,
  modelCommandArbitraries,
  type ModelCommandOptions,
} from './commands/index.js';
import { PrepareCall } from './commands/prepare-call.js';
import { ReleaseLiveStart } from './commands/release-live-start.js';
import { RestartWarm } from './commands/restart-warm.js';
import { RunCall } from './commands/run-call.js';
import { MODEL_INITIAL_CATALOGS } from './run.js';
import type { ModelCommand } from './system.js';

/**
 * Warm-start sequences (DESIGN §19.2–§19.3) for a system created with `cache: true`: a few of
 * every command (the cache fills, catalogs change silently or with `list_changed`), a
 * `restartWarm(eager | lazy)` and a capture (a provisional step), then commands weighted towards what a warm start is about:
 * captures of provisional steps, calls to provisional tools, catalogs edited before the live
 * listing (in memory only: `mutations: false` leaves catalog changes out for stdio servers),
 * held live starts released, failed starts, and further restarts.
 */
export function warmModelCommands(
  options: Pick<ModelCommandOptions, 'servers' | 'maxCommands' | 'mutations'> = {},
): fc.Arbitrary<ModelCommand[]> {
  const servers = options.servers ?? Object.keys(MODEL_INITIAL_CATALOGS);
  const max = options.maxCommands ?? 30;
  const mutations = options.mutations !== false;
  const all = modelCommandArbitraries({ servers, warm: true, mutations });
  const server = fc.constantFrom(...servers);
  const prepare = fc
    .tuple(arbModelIndex(3), fc.nat({ max: 4 }))
    .map(([b, t]): ModelCommand => new PrepareCall(b, t));
  const run = arbModelIndex(5).map((c): ModelCommand => new RunCall(c));
  const release = server.map((s): ModelCommand => new ReleaseLiveStart(s));
  const edit = fc
    .tuple(server, arbPages())
    .map(([s, p]): ModelCommand => new EditNextCatalog(s, p));
  const focused = [
    ...all,
    fc.constant<ModelCommand>(new Capture()),
    prepare,
    prepare,
    prepare,
    run,
    run,
    run,
    release,
    release,
    ...(mutations ? [edit] : []),
  ];
  return fc
    .tuple(
      fc.commands(all, { maxCommands: Math.ceil(max / 4), size: 'max' }),
      fc.boolean(),
      fc.commands(focused, { maxCommands: max, size: 'max' }),
    )
    .map(([before, lazy, after]) => [...before, new RestartWarm(lazy), new Capture(), ...after]);
}
