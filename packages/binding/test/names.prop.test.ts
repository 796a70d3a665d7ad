import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  assignModelNames,
  sanitizeNamePart,
  type QualifiedToolName,
} from '@stepbind/binding/internal';
import { modelNamesOf } from '../src/names.js';

const seed = Number(process.env.STEPBIND_SEED ?? Date.now());
console.log(`names.prop: seed ${seed} (STEPBIND_SEED=${seed} to replay)`);

// Names built from a tiny alphabet collide after sanitising ('.' and '_'), plus arbitrary strings
// and very long names.
const part = fc.oneof(
  fc.stringMatching(/^[ab._]{0,4}$/),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 8 }),
  fc.stringMatching(/^[a-z]{60,90}$/),
);
const pairs = fc.array(fc.record({ server: part, tool: part }), { maxLength: 40 });

const key = (p: QualifiedToolName): string => JSON.stringify([p.server, p.tool]);

describe('model-facing names (property)', () => {
  it('are injective, reversible, at most 64 characters, in [A-Za-z0-9_-], and order-independent', () => {
    fc.assert(
      fc.property(pairs, fc.infiniteStream(fc.nat()), (list, randoms) => {
        const table = assignModelNames(list);
        const distinct = new Map(list.map((p) => [key(p), p]));
        const names = new Set<string>();
        for (const p of distinct.values()) {
          const name = table.forward(p.server, p.tool);
          expect(name).toBeDefined();
          expect(name).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
          names.add(name ?? '');
          expect(table.reverse(name ?? '')).toEqual({ server: p.server, tool: p.tool });
        }
        expect(names.size).toBe(distinct.size);
        expect(table.entries).toHaveLength(distinct.size);

        const shuffled = [...list];
        const it = randoms[Symbol.iterator]();
        for (let i = shuffled.length - 1; i > 0; i--) {
          const j = (it.next().value as number) % (i + 1);
          [shuffled[i], shuffled[j]] = [
            shuffled[j] as QualifiedToolName,
            shuffled[i] as QualifiedToolName,
          ];
        }
        expect(assignModelNames(shuffled).entries).toEqual(table.entries);
      }),
      { seed, verbose: true },
    );
  });

  it('keep the plain server__tool name whenever it is short and unique after sanitising', () => {
    fc.assert(
      fc.property(pairs, (list) => {
        const table = assignModelNames(list);
        const base = (p: QualifiedToolName): string =>
          `${p.server.replace(/[^A-Za-z0-9_-]/gu, '_')}__${p.tool.replace(/[^A-Za-z0-9_-]/gu, '_')}`;
        const distinct = [...new Map(list.map((p) => [key(p), p])).values()];
        for (const p of distinct) {
          const b = base(p);
          const unique = distinct.filter((q) => base(q) === b).length === 1;
          if (unique && b.length <= 64) expect(table.forward(p.server, p.tool)).toBe(b);
        }
      }),
      { seed, verbose: true },
    );
  });

  it('of one server come out of the snapshot fast path exactly as assignModelNames gives them', () => {
    fc.assert(
      fc.property(part, fc.array(part, { maxLength: 30 }), (server, tools) => {
        const parts = tools.map(sanitizeNamePart);
        const clashes = new Set(parts).size < new Set(tools).size;
        const table = assignModelNames(tools.map((tool) => ({ server, tool })));
        expect(modelNamesOf(server, tools, parts, clashes)).toEqual(
          tools.map((tool) => table.forward(server, tool)),
        );
      }),
      { seed, verbose: true },
    );
  });

  it('sanitise valid MCP tool names by replacing "." only', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9._-]{1,128}$/), (name) => {
        expect(sanitizeNamePart(name)).toBe(name.replace(/[^A-Za-z0-9_-]/gu, '_'));
        expect(sanitizeNamePart(name)).toBe(name.replaceAll('.', '_'));
      }),
      { seed, verbose: true },
    );
  });

  it('are identical in another process', async () => {
    const { execFileSync } = await import('node:child_process');
    const { fileURLToPath } = await import('node:url');
    const dist = fileURLToPath(new URL('../dist/internal.js', import.meta.url));
    const list = [
      { server: 's', tool: 'a.b' },
      { server: 's', tool: 'a_b' },
      { server: 'srv', tool: 'x'.repeat(90) },
    ];
    const out = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const b = await import(${JSON.stringify(dist)}); console.log(JSON.stringify(b.assignModelNames(${JSON.stringify(list)}).entries));`,
      ],
      { encoding: 'utf8' },
    );
    expect(JSON.parse(out)).toEqual(assignModelNames(list).entries);
  });
});
