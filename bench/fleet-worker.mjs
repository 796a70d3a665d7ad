// One revocation-propagation worker of bench/fleet.ts, in its own process: its own PostgreSQL
// connection listening for policy changes and its own policy view. After every applied change it
// runs the admission check for each tool the driver asks about and reports, one JSON line on
// stdout, the policy version, the absolute time (performance.timeOrigin + now, comparable across
// processes of one machine) and which of those tools the check refused.
//
// argv[2]: JSON { url, schema, tools }. Ends when stdin closes.
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { PgHandle, PolicyView } from '@stepbind/runtime/fleet';

const { url, schema, tools } = JSON.parse(process.argv[2]);
const handle = new PgHandle({ url, schema });
const view = new PolicyView(handle, {
  onApplied: (policy) => {
    const t = performance.timeOrigin + performance.now();
    // The admission check as a call arriving now would run it (local view, no database access).
    const refused = tools.filter((tool) => view.isRevoked('s', tool));
    process.stdout.write(`${JSON.stringify({ v: policy.version, t, refused })}\n`);
  },
});
await view.open();
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
process.stdin.resume();
process.stdin.on('end', () => {
  void view.close().then(() => handle.close());
});
