import { describe, expect, it } from 'vitest';
import {
  CatalogSlot,
  assignModelNames,
  bindingViewOf,
  createCatalogSnapshot,
  modelToolOf,
  type BoundServer,
  type CatalogSnapshot,
  type McpToolDefinition,
  type ToolDescriptor,
} from '@stepbind/binding/internal';

describe('assignModelNames', () => {
  it('qualifies names as server__tool', () => {
    const t = assignModelNames([{ server: 'git', tool: 'status' }]);
    expect(t.forward('git', 'status')).toBe('git__status');
    expect(t.reverse('git__status')).toEqual({ server: 'git', tool: 'status' });
  });

  it('replaces characters outside [A-Za-z0-9_-]', () => {
    const t = assignModelNames([{ server: 'my server', tool: 'files.read' }]);
    expect(t.forward('my server', 'files.read')).toBe('my_server__files_read');
  });

  it('gives both names of a collision after sanitising a hash suffix', () => {
    const t = assignModelNames([
      { server: 's', tool: 'a.b' },
      { server: 's', tool: 'a_b' },
    ]);
    const [x, y] = [t.forward('s', 'a.b'), t.forward('s', 'a_b')];
    expect(x).toMatch(/^s__a_b_[0-9a-f]{8}$/);
    expect(y).toMatch(/^s__a_b_[0-9a-f]{8}$/);
    expect(x).not.toBe(y);
    expect(t.reverse(x ?? '')).toEqual({ server: 's', tool: 'a.b' });
  });

  it('shortens names over 64 characters with a stable hash suffix', () => {
    const tool = 'x'.repeat(100);
    const name = assignModelNames([{ server: 'srv', tool }]).forward('srv', tool) ?? '';
    expect(name).toHaveLength(64);
    expect(name).toMatch(/^srv__x+_[0-9a-f]{8}$/);
    expect(assignModelNames([{ server: 'srv', tool }]).forward('srv', tool)).toBe(name);
  });

  it('does not let a suffixed name take a name that is some pair’s plain name', () => {
    const long = { server: 's', tool: 'y'.repeat(80) };
    const suffixed = assignModelNames([long]).forward(long.server, long.tool) ?? '';
    // A second pair whose plain name is exactly that suffixed name keeps it; the long one moves.
    const squatter = { server: 's', tool: suffixed.slice('s__'.length) };
    const t = assignModelNames([long, squatter]);
    expect(t.forward(squatter.server, squatter.tool)).toBe(suffixed);
    expect(t.forward(long.server, long.tool)).not.toBe(suffixed);
    expect(t.forward(long.server, long.tool)?.length).toBeLessThanOrEqual(64);
  });

  it('returns undefined for unknown pairs and names', () => {
    const t = assignModelNames([{ server: 'a', tool: 'b' }]);
    expect(t.forward('a', 'c')).toBeUndefined();
    expect(t.reverse('nope')).toBeUndefined();
  });
});

describe('model tool shapes', () => {
  const snapshot = createCatalogSnapshot({
    identity: { name: 'files', transportDigest: 'sha256:t' },
    audience: 'default',
    policyEpoch: 0,
    revisionProof: 'unversioned',
    discoveryStartedAt: 0,
    pages: [
      [
        { name: 'read.file', description: 'Read.', inputSchema: { type: 'object' } },
        { name: 'stat', inputSchema: { type: 'object', properties: { p: { type: 'string' } } } },
      ],
    ],
  });

  const server = (name: string, catalog: CatalogSnapshot): BoundServer => ({
    name,
    slot: new CatalogSlot(name, catalog),
    catalog,
    revision: 1,
    caller: { closed: false, callTool: () => Promise.resolve({ content: [] }) },
    callTimeoutMs: 1000,
    approval: 'none',
  });
  const catalogOf = (name: string, tools: readonly McpToolDefinition[]): CatalogSnapshot =>
    createCatalogSnapshot({
      identity: { name, transportDigest: 'sha256:t' },
      audience: 'default',
      policyEpoch: 0,
      revisionProof: 'unversioned',
      discoveryStartedAt: 0,
      pages: [tools],
    });

  it('projects every bound tool to a frozen provider-neutral tool', () => {
    const view = bindingViewOf([server('files', snapshot)], []);
    const tools = view.tools;
    expect(tools).toEqual([
      { name: 'files__read_file', description: 'Read.', inputSchema: { type: 'object' } },
      {
        name: 'files__stat',
        description: '',
        inputSchema: { type: 'object', properties: { p: { type: 'string' } } },
      },
    ]);
    expect(Object.isFrozen(tools)).toBe(true);
    expect(Object.isFrozen(tools[0])).toBe(true);
    expect(view.byModelName.get('files__stat')?.descriptor).toBe(snapshot.tools[1]);
  });

  it('gives a tool whose description is not a string the empty description', () => {
    const odd = createCatalogSnapshot({
      identity: { name: 'odd', transportDigest: 'sha256:t' },
      audience: 'default',
      policyEpoch: 0,
      revisionProof: 'unversioned',
      discoveryStartedAt: 0,
      pages: [[{ name: 'x', description: 42, inputSchema: { type: 'object' } }]],
    });
    expect(bindingViewOf([server('odd', odd)], []).tools[0]?.description).toBe('');
    expect(modelToolOf('odd__x', odd.tools[0] as ToolDescriptor).description).toBe('');
  });

  it("names every tool by one cross-server table when two servers' model names clash", () => {
    // Server "a__b" tool "c" and server "a" tool "b__c" both sanitise to "a__b__c".
    const first = catalogOf('a__b', [{ name: 'c', inputSchema: { type: 'object' } }]);
    const second = catalogOf('a', [{ name: 'b__c', inputSchema: { type: 'object' } }]);
    const view = bindingViewOf([server('a__b', first), server('a', second)], []);
    const names = view.tools.map((t) => t.name);
    expect(new Set(names).size).toBe(2);
    const table = assignModelNames([
      { server: 'a__b', tool: 'c' },
      { server: 'a', tool: 'b__c' },
    ]);
    expect(names).toEqual([table.forward('a__b', 'c'), table.forward('a', 'b__c')]);
    for (const name of names) expect(view.byModelName.get(name)?.modelName).toBe(name);
  });
});
