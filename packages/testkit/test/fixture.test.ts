import { describe, expect, it } from 'vitest';
import { createScriptedServer, FixtureError, parseServerFixture } from '@stepbind/testkit';

const page = { tools: [] };

describe('parseServerFixture', () => {
  it('accepts a fixture using every feature', () => {
    const fixture = {
      generations: [
        {
          revision: 'r1',
          pages: [
            { tools: [{ anything: true }], nextCursor: '', revision: null },
            { tools: [], nextCursor: 'loop', nextPage: 1 },
          ],
        },
        { pages: [page], endless: true },
      ],
      initialGeneration: 1,
      calls: { a: { text: 't', structuredContent: { x: 1 }, isError: true } },
      triggers: [
        { on: { method: 'tools/list', nth: 2, cursor: null }, setGeneration: 0, notify: 'after' },
        {
          on: { method: 'tools/call', tool: 'a' },
          delayMs: 5,
          setRevision: null,
          stateChange: 'before',
          exit: 3,
        },
      ],
    };
    expect(parseServerFixture(fixture)).toBe(fixture);
  });

  it.each([
    ['not an object', [], '$'],
    ['no generations', { generations: [] }, '$.generations'],
    ['pages not an array', { generations: [{ pages: {} }] }, '$.generations[0].pages'],
    [
      'unknown page key',
      { generations: [{ pages: [{ tools: [], next: 'x' }] }] },
      '$.generations[0].pages[0].next',
    ],
    [
      'numeric cursor',
      { generations: [{ pages: [{ tools: [], nextCursor: 1 }, page] }] },
      '$.generations[0].pages[0].nextCursor',
    ],
    [
      'explicit cursor on last page',
      { generations: [{ pages: [{ tools: [], nextCursor: 'x' }] }] },
      '$.generations[0].pages[0].nextCursor',
    ],
    [
      'nextPage out of range',
      { generations: [{ pages: [{ tools: [], nextPage: 4 }] }] },
      '$.generations[0].pages[0].nextPage',
    ],
    [
      'one cursor, two targets',
      {
        generations: [
          {
            pages: [
              { tools: [], nextCursor: 'c' },
              { tools: [], nextCursor: 'c', nextPage: 0 },
            ],
          },
        ],
      },
      '$.generations[0].pages[1].nextCursor',
    ],
    [
      'bad call result',
      { generations: [{ pages: [page] }], calls: { a: { isError: 'yes' } } },
      '$.calls["a"].isError',
    ],
    [
      'unknown trigger method',
      { generations: [{ pages: [page] }], triggers: [{ on: { method: 'ping' } }] },
      '$.triggers[0].on.method',
    ],
    [
      'nth zero',
      { generations: [{ pages: [page] }], triggers: [{ on: { method: 'tools/list', nth: 0 } }] },
      '$.triggers[0].on.nth',
    ],
    [
      'missing generation',
      {
        generations: [{ pages: [page] }],
        triggers: [{ on: { method: 'tools/list' }, setGeneration: 1 }],
      },
      '$.triggers[0].setGeneration',
    ],
    [
      'bad notify',
      {
        generations: [{ pages: [page] }],
        triggers: [{ on: { method: 'tools/call' }, notify: 'during' }],
      },
      '$.triggers[0].notify',
    ],
  ])('rejects %s with the JSON path of the problem', (_label, fixture, path) => {
    let caught: unknown;
    try {
      parseServerFixture(fixture);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(FixtureError);
    expect((caught as FixtureError).path).toBe(path);
    expect((caught as FixtureError).message).toContain(`fixture at ${path}:`);
  });

  it('createScriptedServer rejects a fixture scenario without a fixture', () => {
    expect(() => createScriptedServer({ scenario: 'fixture' })).toThrow(FixtureError);
    expect(() =>
      createScriptedServer({ scenario: 'normal', fixture: { generations: [{ pages: [page] }] } }),
    ).toThrow(/takes no fixture/);
  });
});
