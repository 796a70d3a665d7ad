import { describe, expect, it } from 'vitest';
import {
  CatalogError,
  CatalogRegistry,
  createCatalogSnapshot,
  type CatalogSnapshot,
  type ServerIdentity,
} from '@stepbind/binding/internal';

const identity: ServerIdentity = { name: 'files', transportDigest: 'sha256:t1' };
const toolA = { name: 'a', inputSchema: { type: 'object' } };
const toolB = { name: 'b', inputSchema: { type: 'object' } };

function candidate(
  tools: unknown[] = [toolA],
  over: {
    audience?: string;
    policyEpoch?: number;
    identity?: ServerIdentity;
    proven?: boolean;
  } = {},
): CatalogSnapshot {
  return createCatalogSnapshot({
    identity: over.identity ?? identity,
    audience: over.audience ?? 'user',
    policyEpoch: over.policyEpoch ?? 0,
    pages: [tools],
    revisionProof: over.proven === true ? 'proven' : 'unversioned',
    ...(over.proven === true ? { sourceRevision: 'r1' } : {}),
    discoveryStartedAt: 0,
  });
}

function conflict(fn: () => unknown): CatalogError {
  try {
    fn();
  } catch (error) {
    if (error instanceof CatalogError && error.code === 'PUBLISH_CONFLICT') return error;
    throw error;
  }
  throw new Error('expected PUBLISH_CONFLICT');
}

describe('CatalogRegistry.publish', () => {
  it('publishes a proven candidate as ELIGIBLE with generation 1', () => {
    const r = new CatalogRegistry();
    const p = r.publish(candidate([toolA], { proven: true }), { expectedGeneration: 0 });
    expect(p.generation).toBe(1);
    expect(p.state).toBe('ELIGIBLE');
    expect(r.current('files', 'user')).toBe(p);
    expect(r.lifecycleOf(p)).toBe('ELIGIBLE');
  });

  it('publishes an unversioned candidate as UNVERSIONED_OBSERVATION', () => {
    const r = new CatalogRegistry();
    const p = r.publish(candidate(), { expectedGeneration: 0 });
    expect(p.state).toBe('UNVERSIONED_OBSERVATION');
    expect(r.lifecycleOf(p)).toBe('UNVERSIONED_OBSERVATION');
  });

  it('publishes exactly one of two candidates racing from the same generation', () => {
    const r = new CatalogRegistry();
    const [c1, c2] = [candidate([toolA]), candidate([toolB])];
    const first = r.publish(c1, { expectedGeneration: 0 });
    const e = conflict(() => r.publish(c2, { expectedGeneration: 0 }));
    expect(e.detail).toMatchObject({
      reason: 'generation',
      activeGeneration: 1,
      expectedGeneration: 0,
    });
    expect(r.current('files', 'user')).toBe(first);
  });

  it('gives an A-B-A change distinct generations with equal page roots', () => {
    const r = new CatalogRegistry();
    const a1 = r.publish(candidate([toolA]), { expectedGeneration: 0 });
    const b = r.publish(candidate([toolB]), { expectedGeneration: a1.generation });
    const a2 = r.publish(candidate([toolA]), { expectedGeneration: b.generation });
    expect([a1.generation, b.generation, a2.generation]).toEqual([1, 2, 3]);
    expect(a2.pageRoot).toBe(a1.pageRoot);
    expect(b.pageRoot).not.toBe(a1.pageRoot);
  });

  it('refuses a candidate built under another policy epoch and changes nothing', () => {
    const r = new CatalogRegistry({ policyEpoch: 2 });
    const e = conflict(() =>
      r.publish(candidate([toolA], { policyEpoch: 1 }), { expectedGeneration: 0 }),
    );
    expect(e.detail.reason).toBe('policy-epoch');
    expect(r.current('files', 'user')).toBeUndefined();
    expect(r.lastIssuedGeneration('files', 'user')).toBe(0);
  });

  it('only lets the policy epoch increase', () => {
    const r = new CatalogRegistry({ policyEpoch: 3 });
    r.setPolicyEpoch(4);
    expect(r.policyEpoch).toBe(4);
    expect(() => r.setPolicyEpoch(2)).toThrow(CatalogError);
    expect(r.policyEpoch).toBe(4);
  });

  it('refuses a changed server identity unless the change is expected', () => {
    const r = new CatalogRegistry();
    const old = r.publish(candidate(), { expectedGeneration: 0 });
    const moved = { ...identity, transportDigest: 'sha256:t2' };
    const e = conflict(() =>
      r.publish(candidate([toolA], { identity: moved }), { expectedGeneration: 1 }),
    );
    expect(e.detail.reason).toBe('identity-changed');
    expect(r.current('files', 'user')).toBe(old);
    const next = r.publish(candidate([toolA], { identity: moved }), {
      expectedGeneration: 1,
      expectIdentityChange: true,
    });
    expect(next.generation).toBe(2);
    expect(r.current(identity, 'user')).toBeUndefined();
    expect(r.current(moved, 'user')).toBe(next);
  });

  it('treats a different serverInfo or protocol version as a different identity', () => {
    const r = new CatalogRegistry();
    r.publish(candidate([toolA], { identity: { ...identity, protocolVersion: '2025-03-26' } }), {
      expectedGeneration: 0,
    });
    const e = conflict(() =>
      r.publish(candidate([toolA], { identity: { ...identity, protocolVersion: '2025-06-18' } }), {
        expectedGeneration: 1,
      }),
    );
    expect(e.detail.reason).toBe('identity-changed');
  });

  it('accepts any identity after retireServer, with generations still increasing', () => {
    const r = new CatalogRegistry();
    const old = r.publish(candidate(), { expectedGeneration: 0 });
    r.retireServer('files');
    expect(r.lifecycleOf(old)).toBe('RETIRED');
    const next = r.publish(
      candidate([toolA], { identity: { ...identity, transportDigest: 'x' } }),
      {
        expectedGeneration: 0,
      },
    );
    expect(next.generation).toBe(2);
  });

  it('refuses to publish a snapshot that is already published', () => {
    const r = new CatalogRegistry();
    const p = r.publish(candidate(), { expectedGeneration: 0 });
    expect(conflict(() => r.publish(p, { expectedGeneration: 1 })).detail.reason).toBe(
      'not-a-candidate',
    );
  });
});

describe('audiences', () => {
  it('never returns another audience’s snapshot', () => {
    const r = new CatalogRegistry();
    const user = r.publish(candidate([toolA], { audience: 'user' }), { expectedGeneration: 0 });
    const admin = r.publish(candidate([toolB], { audience: 'admin' }), { expectedGeneration: 0 });
    expect(r.current('files', 'user')).toBe(user);
    expect(r.current('files', 'admin')).toBe(admin);
    expect(r.current('files', 'guest')).toBeUndefined();
    expect(r.current(identity, 'guest')).toBeUndefined();
    expect(user.generation).toBe(1);
    expect(admin.generation).toBe(1);
  });
});

describe('holding and retirement', () => {
  it('keeps a superseded snapshot readable while held, then retires it', () => {
    const retired: CatalogSnapshot[] = [];
    const r = new CatalogRegistry({ onRetired: (s) => retired.push(s) });
    const first = r.publish(candidate([toolA]), { expectedGeneration: 0 });
    const held = r.acquireCurrent('files', 'user');
    expect(held?.snapshot).toBe(first);
    r.publish(candidate([toolB]), { expectedGeneration: 1 });
    expect(r.lifecycleOf(first)).toBe('SUPERSEDED');
    expect(first.toolsByName.get('a')?.name).toBe('a');
    expect(retired).toEqual([]);
    held?.release();
    held?.release();
    expect(r.lifecycleOf(first)).toBe('RETIRED');
    expect(retired).toEqual([first]);
    expect(() => r.acquire(first)).toThrow(
      expect.objectContaining({ code: 'SNAPSHOT_RETIRED' }) as Error,
    );
  });

  it('retires an unheld snapshot as soon as it is superseded', () => {
    const r = new CatalogRegistry();
    const first = r.publish(candidate([toolA]), { expectedGeneration: 0 });
    r.publish(candidate([toolB]), { expectedGeneration: 1 });
    expect(r.lifecycleOf(first)).toBe('RETIRED');
  });

  it('does not know candidates it never published', () => {
    const r = new CatalogRegistry();
    const c = candidate();
    expect(r.lifecycleOf(c)).toBeUndefined();
    expect(() => r.acquire(c)).toThrow(CatalogError);
  });
});
