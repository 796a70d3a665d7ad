import type { FixtureGeneration, ServerFixture } from './fixture.js';
import type { ScenarioName } from './types.js';

/** The revision `_meta` key every revision scenario uses. */
export const CATALOG_REVISION_META_KEY = 'io.stepbind/catalogRevision';

/** A small valid tool definition named `name`. */
export function scriptedTool(name: string): Record<string, unknown> {
  return {
    name,
    description: `Scripted tool ${name}.`,
    inputSchema: { type: 'object', properties: { input: { type: 'string' } } },
  };
}

const pages = (...names: readonly (readonly string[])[]): FixtureGeneration['pages'] =>
  names.map((page) => ({ tools: page.map(scriptedTool) }));

const threePages = pages(['alpha'], ['beta'], ['gamma']);

/** The built-in catalog of every scenario except `fixture`. */
export function scenarioFixture(scenario: Exclude<ScenarioName, 'fixture'>): ServerFixture {
  switch (scenario) {
    case 'normal':
      return { generations: [{ pages: pages(['alpha'], [], ['beta', 'gamma']) }] };
    case 'single':
      return { generations: [{ pages: pages(['alpha', 'beta']) }] };
    case 'empty':
      return { generations: [{ pages: pages([]) }] };
    case 'empty-token':
      return {
        generations: [
          {
            pages: [
              { tools: [scriptedTool('alpha')], nextCursor: '' },
              { tools: [scriptedTool('beta')] },
            ],
          },
        ],
      };
    case 'repeat':
      // Page 1 leads to itself, so its cursor is the one that reached it.
      return {
        generations: [{ pages: [{ tools: [scriptedTool('alpha')] }, { tools: [], nextPage: 1 }] }],
      };
    case 'cycle':
      return {
        generations: [
          {
            pages: [
              { tools: [scriptedTool('alpha')] },
              { tools: [scriptedTool('beta')] },
              { tools: [scriptedTool('gamma')], nextPage: 1 },
            ],
          },
        ],
      };
    case 'endless':
      return { generations: [{ pages: [{ tools: [] }], endless: true }] };
    case 'duplicate':
      return { generations: [{ pages: pages(['alpha'], ['beta'], ['alpha']) }] };
    case 'change':
      return {
        generations: [
          { pages: pages(['alpha'], ['beta']) },
          { pages: pages(['alpha', 'delta'], ['gamma']) },
        ],
        triggers: [
          { on: { method: 'tools/list', nth: 1 }, setGeneration: 1, stateChange: 'after' },
        ],
      };
    case 'revision-consistent':
      return { generations: [{ pages: threePages, revision: 'rev-1' }] };
    case 'revision-changing':
      return {
        generations: [{ pages: threePages, revision: 'rev-1' }],
        triggers: [
          { on: { method: 'tools/list', nth: 1 }, setRevision: 'rev-2', stateChange: 'after' },
        ],
      };
    case 'revision-missing-page':
      return {
        generations: [
          {
            pages: [
              { tools: [scriptedTool('alpha')] },
              { tools: [scriptedTool('beta')], revision: null },
              { tools: [scriptedTool('gamma')] },
            ],
            revision: 'rev-1',
          },
        ],
      };
  }
}
