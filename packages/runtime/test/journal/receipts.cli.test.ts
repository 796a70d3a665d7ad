import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { ReceiptBody } from '@stepbind/binding';
import { openSqliteJournal as openStore, type SqliteJournalOptions } from '@stepbind/runtime';
import { runCli } from '../../src/cli/run.js';
import { expect, it } from 'vitest';
import { tempDir } from '@stepbind/testkit';
import { receipt } from '../support/journal.js';
import { describeEachDriver } from './drivers.js';

async function runReceipts(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(args, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

describeEachDriver('stepbind receipts', (driver) => {
  // Every journal of this suite is written and read on the suite's driver.
  const openSqliteJournal = (options: SqliteJournalOptions) => openStore({ driver, ...options });
  const cli = (args: string[]) => runReceipts([...args, '--driver', driver]);

  /** A closed journal file holding `n` receipts (keys k1..kn); returns the stored texts. */
  async function journalWith(path: string, n: number): Promise<string[]> {
    const store = openSqliteJournal({ path });
    for (let i = 1; i <= n; i++) await store.appendReceipt(receipt(i));
    const texts = (await store.readReceipts()).map((r) => r.text);
    await store.close();
    return texts;
  }

  it('verify exits 0 for an intact chain and says how many receipts it checked', async () => {
    using dir = tempDir('receipts');
    const path = join(dir.path, 'journal.db');
    await journalWith(path, 5);
    const { code, out } = await cli(['receipts', 'verify', '--journal', path]);
    expect(code).toBe(0);
    expect(out).toMatch(/5 receipts verified from the start/);
    const json = await cli(['receipts', 'verify', '--journal', path, '--json']);
    expect(JSON.parse(json.out)).toMatchObject({ ok: true, count: 5, head: { seq: 5 } });
  });

  it('verify names the SQLite driver it read the file with and its version, in text and JSON', async () => {
    using dir = tempDir('receipts');
    const path = join(dir.path, 'journal.db');
    await journalWith(path, 1);
    const { out } = await cli(['receipts', 'verify', '--journal', path]);
    expect(out).toMatch(new RegExp(`^driver: ${driver} \\(SQLite 3\\.\\d+\\.\\d+\\)$`, 'm'));
    const json = await cli(['receipts', 'verify', '--journal', path, '--json']);
    expect(JSON.parse(json.out)).toMatchObject({
      driver,
      sqliteVersion: expect.stringMatching(/^3\./),
    });
  });

  it('refuses an unknown --driver as a usage error', async () => {
    const bad = await runReceipts([
      'receipts',
      'verify',
      '--journal',
      'x.db',
      '--driver',
      'sqlite4',
    ]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--driver needs one of auto, node:sqlite, better-sqlite3');
  });

  it('verify exits 1 when one byte of one receipt is flipped in the file', async () => {
    using dir = tempDir('receipts');
    const path = join(dir.path, 'journal.db');
    const texts = await journalWith(path, 5);
    const bytes = readFileSync(path);
    const target = Buffer.from(texts[2] as string, 'utf8');
    const at = bytes.indexOf(target);
    expect(at).toBeGreaterThan(0);
    // Flip the lowest bit of one character inside the third receipt's body.
    const i = at + Math.floor(target.length / 2);
    bytes[i] = (bytes[i] as number) ^ 1;
    writeFileSync(path, bytes);
    const { code, out } = await cli(['receipts', 'verify', '--journal', path]);
    expect(code).toBe(1);
    expect(out).toMatch(/digest: receipt 3 was changed/);
  });

  it('verify exits 1 when one receipt is dropped', async () => {
    using dir = tempDir('receipts');
    const path = join(dir.path, 'journal.db');
    await journalWith(path, 5);
    const raw = new Database(path);
    raw.prepare('DELETE FROM receipts WHERE seq = 2').run();
    raw.close();
    const { code, out } = await cli(['receipts', 'verify', '--journal', path, '--json']);
    expect(code).toBe(1);
    expect(JSON.parse(out)).toMatchObject({
      ok: false,
      count: 1,
      findings: [{ reason: 'gap', seq: 3 }],
    });
  });

  it('list prints every receipt, or those of one key as JSON', async () => {
    using dir = tempDir('receipts');
    const path = join(dir.path, 'journal.db');
    await journalWith(path, 3);
    const all = await cli(['receipts', 'list', '--journal', path]);
    expect(all.code).toBe(0);
    // A header row, then one row per receipt.
    expect(all.out.trim().split('\n')).toHaveLength(4);
    expect(all.out).toMatch(/^SEQ +AT +SOURCE +KEY +MODEL NAME +OUTCOME +DELIVERY +REPLAYED\n/);
    expect(all.out).toContain('s__write_doc');
    const one = await cli(['receipts', 'list', '--journal', path, '--json', '--key', 'k2']);
    const rows = JSON.parse(one.out) as (ReceiptBody & { seq: number; digest: string })[];
    expect(rows.map((r) => [r.seq, r.key, r.outcome])).toEqual([[2, 'k2', 'ok']]);
    expect(rows[0]?.digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it('exits 2 for a file that is not a journal, a missing --journal and an unknown subcommand', async () => {
    using dir = tempDir('receipts');
    const path = join(dir.path, 'notes.txt');
    writeFileSync(path, 'not a database, just text\n'.repeat(100));
    const notJournal = await cli(['receipts', 'verify', '--journal', path]);
    expect(notJournal.code).toBe(2);
    expect(notJournal.err).toContain('JOURNAL_CORRUPT');
    expect((await cli(['receipts', 'verify'])).code).toBe(2);
    expect((await cli(['receipts', 'audit', '--journal', path])).code).toBe(2);
    // verify never writes: the file is byte for byte what it was.
    expect(readFileSync(path, 'utf8')).toBe('not a database, just text\n'.repeat(100));
  });
});
