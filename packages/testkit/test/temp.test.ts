import { existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname } from 'node:path';
import { tempAudit, tempDir } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';

describe('tempDir', () => {
  it('is a fresh stepbind- directory in the temp directory that await using removes', async () => {
    let path: string;
    {
      await using dir = tempDir('unit');
      path = dir.path;
      expect(dirname(path)).toBe(tmpdir());
      expect(path).toMatch(/[/\\]stepbind-unit-[^/\\]+$/);
      writeFileSync(dir.file('inside.txt'), 'x');
      expect(existsSync(dir.file('inside.txt'))).toBe(true);
    }
    expect(existsSync(path)).toBe(false);
  });

  it('dispose() removes it too, and is idempotent', async () => {
    const dir = tempDir('twice');
    await dir.dispose();
    await dir.dispose();
    expect(existsSync(dir.path)).toBe(false);
  });
});

describe('tempAudit', () => {
  it('names a trail in a directory of its own, reads it, and removes both on dispose', async () => {
    const audit = tempAudit('unit');
    expect(existsSync(audit.path)).toBe(false);
    expect(await audit.read()).toEqual([]);
    const entry = { seq: 1, method: 'initialize', generation: 0, pid: 1 };
    writeFileSync(audit.path, `${JSON.stringify(entry)}\n`);
    expect(await audit.read()).toEqual([entry]);
    await audit.dispose();
    expect(existsSync(dirname(audit.path))).toBe(false);
  });
});
