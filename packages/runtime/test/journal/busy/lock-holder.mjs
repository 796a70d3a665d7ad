// Another process holding a SQLite journal's write lock (issue 25 finding 8 tests, and the
// cross-driver test): opens the file given as argv[2] with the driver argv[3] (better-sqlite3 by
// default, or node:sqlite), runs BEGIN IMMEDIATE, inserts the INTENT record of key argv[4] inside
// that transaction when one is given, prints "locked", and on a line "release" on stdin commits,
// prints "released" and exits. stdin closing releases it too.
import { createInterface } from 'node:readline';
import process from 'node:process';

const [path, driver, key] = process.argv.slice(2);
let db;
if (driver === 'node:sqlite') {
  const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
  db = new DatabaseSync(path);
} else {
  const { default: Database } = await import('better-sqlite3');
  db = new Database(path);
}
// Never wait here: the test process holds nothing, so the lock is taken at once or this fails.
db.exec('PRAGMA busy_timeout = 0');
db.exec('BEGIN IMMEDIATE');
if (key !== undefined) {
  const context = JSON.stringify({ stepId: 'other', server: 's', tool: 'send' });
  db.prepare(
    `INSERT INTO records (key, state, version, attempt, owner, context, args_digest, created_at,
       updated_at, lease_expires_at, expires_at, outcome, error, resolution)
     VALUES (?, 'INTENT', 1, 1, 'other:1:owner', ?, 'sha256:args', 1000, 1000, 2000, NULL, NULL,
       NULL, NULL)`,
  ).run(key, context);
}
process.stdout.write('locked\n');
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'release') break;
}
db.exec('COMMIT');
db.close();
process.stdout.write('released\n');
