// One process of the cross-process refresh test (test/auth/refresh.process.test.ts and
// test/fleet/tokens.pg.test.ts): opens the shared token store named in argv[2] (JSON
// { kind: 'file', path } or { kind: 'pg', url, schema }) from the built runtime, then answers one
// JSON line per command on stdin: { id, key, now, endpoint } reads the login of `key`, and when it
// expired by the logical clock `now` refreshes it through refreshSingleFlight with a REAL
// refresh_token grant against `endpoint`. It answers the access token it ended with.
/* global fetch, URLSearchParams */
import process from 'node:process';
import { createInterface } from 'node:readline';
import { FileTokenStore } from '../../dist/auth/file-token-store.js';
import { refreshSingleFlight } from '../../dist/auth/refresh.js';

const plan = JSON.parse(process.argv[2]);
const print = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

let store;
let fleet;
if (plan.kind === 'file') {
  store = new FileTokenStore({ path: plan.path });
} else {
  const { attachFleet } = await import('@stepbind/runtime/fleet');
  fleet = await attachFleet({ url: plan.url, schema: plan.schema });
  store = fleet.tokenStore();
}
print({ event: 'ready', pid: process.pid });

/** The refresh_token grant (form-encoded POST, as RFC 6749 §6 says). */
async function grant(endpoint, login, now, signal) {
  const response = await fetch(`${endpoint}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'refresh_token',
      refresh_token: login.tokens.refreshToken,
    }).toString(),
    signal,
  });
  const body = await response.json();
  if (!response.ok) throw new Error(`refresh refused: ${body.error}`);
  return {
    principal: login.principal,
    tokens: {
      accessToken: body.access_token,
      tokenType: 'Bearer',
      refreshToken: body.refresh_token,
      // The logical clock: a token issued at `now` is good until the next tick.
      expiresAt: now + body.expires_in,
    },
  };
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const cmd = JSON.parse(line);
  if (cmd.op === 'exit') break;
  try {
    const usable = (login) => (login.tokens.expiresAt ?? 0) > cmd.now;
    let login = await store.get(cmd.key);
    let refreshed = false;
    if (login === undefined || !usable(login)) {
      refreshed = true;
      login = await refreshSingleFlight({
        store,
        key: cmd.key,
        seen: login,
        usable,
        refresh: (held, signal) => grant(cmd.endpoint, held, cmd.now, signal),
      });
    }
    print({
      id: cmd.id,
      ok: true,
      access: login.tokens.accessToken,
      version: login.version,
      refreshed,
    });
  } catch (error) {
    print({ id: cmd.id, ok: false, code: error.code, message: String(error.message) });
  }
}
await fleet?.close();
await store.close?.();
