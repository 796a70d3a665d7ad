// Opens the journal argv[2] with driver argv[3] under whichever Node runs this (the ABI-mismatch
// test runs it on another Node than better-sqlite3 was built for) and prints one JSON line:
// { ok, driver, node } or { ok: false, name, code, detail, message }.
import process from 'node:process';
import { openSqliteJournal } from '@stepbind/runtime';

const [path, driver] = process.argv.slice(2);
try {
  const store = openSqliteJournal({ path, driver });
  await store.insert({
    key: 'k',
    state: 'INTENT',
    version: 1,
    attempt: 1,
    owner: 'abi:1:owner',
    context: { stepId: 's' },
    argsDigest: 'sha256:args',
    createdAt: 1000,
    updatedAt: 1000,
    leaseExpiresAt: 2000,
    expiresAt: null,
    outcome: null,
    error: null,
    resolution: null,
  });
  await store.close();
  process.stdout.write(
    `${JSON.stringify({ ok: true, driver: store.driver, node: process.version })}\n`,
  );
} catch (error) {
  const { name, code, detail, message } = error;
  process.stdout.write(`${JSON.stringify({ ok: false, name, code, detail, message })}\n`);
}
