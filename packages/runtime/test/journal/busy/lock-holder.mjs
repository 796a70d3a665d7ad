// Another process holding a SQLite journal's write lock (issue 25 finding 8 tests): opens the file
// given as argv[2] with better-sqlite3, runs BEGIN IMMEDIATE, prints "locked", and on a line
// "release" on stdin commits, prints "released" and exits. stdin closing releases it too.
import { createInterface } from 'node:readline';
import process from 'node:process';
import Database from 'better-sqlite3';

const db = new Database(process.argv[2]);
// Never wait here: the test process holds nothing, so the lock is taken at once or this fails.
db.pragma('busy_timeout = 0');
db.exec('BEGIN IMMEDIATE');
process.stdout.write('locked\n');
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'release') break;
}
db.exec('COMMIT');
db.close();
process.stdout.write('released\n');
