// Another process holding a SQLite journal's write lock (issue 25 finding 8 tests): opens the file
// given as argv[2] with the driver argv[3] (better-sqlite3 by default, or node:sqlite), runs BEGIN IMMEDIATE, prints "locked", and on a line
// "release" on stdin commits, prints "released" and exits. stdin closing releases it too.
import { createInterface } from 'node:readline';
import process from 'node:process';

let db;
if (process.argv[3] === 'node:sqlite') {
  const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
  db = new DatabaseSync(process.argv[2]);
} else {
  const { default: Database } = await import('better-sqlite3');
  db = new Database(process.argv[2]);
}
// Never wait here: the test process holds nothing, so the lock is taken at once or this fails.
db.exec('PRAGMA busy_timeout = 0');
db.exec('BEGIN IMMEDIATE');
process.stdout.write('locked\n');
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'release') break;
}
db.exec('COMMIT');
db.close();
process.stdout.write('released\n');
