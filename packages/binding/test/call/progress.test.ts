import { describe, expect, it } from 'vitest';
import {
  MAX_PROGRESS_MESSAGE_CHARS,
  ProgressGate,
  progressRelay,
} from '../../src/call/progress.js';

describe('ProgressGate', () => {
  it('passes increasing finite progress with its total and message, frozen', () => {
    const gate = new ProgressGate();
    const first = gate.accept({ progressToken: 't', progress: 0, total: 10, message: 'start' });
    expect(first).toEqual({ progress: 0, total: 10, message: 'start' });
    expect(Object.isFrozen(first)).toBe(true);
    expect(gate.accept({ progress: 0.5 })).toEqual({ progress: 0.5 });
  });

  it('drops a progress that is not a finite number or does not increase', () => {
    const gate = new ProgressGate();
    expect(gate.accept({ progress: 3 })).toEqual({ progress: 3 });
    for (const progress of [3, 2, Number.NaN, Number.POSITIVE_INFINITY, '4', null, undefined]) {
      expect(gate.accept({ progress })).toBeUndefined();
    }
    expect(gate.accept(null)).toBeUndefined();
    expect(gate.accept('progress')).toBeUndefined();
    expect(gate.accept({ progress: 4 })).toEqual({ progress: 4 });
  });

  it('leaves out a non-finite total and a non-string message, and cuts a long message', () => {
    const gate = new ProgressGate();
    expect(gate.accept({ progress: 1, total: Number.NaN, message: 7 })).toEqual({ progress: 1 });
    expect(gate.accept({ progress: 2, total: Number.NEGATIVE_INFINITY })).toEqual({ progress: 2 });
    const long = gate.accept({ progress: 3, message: 'm'.repeat(1_000_000) });
    expect(long?.message).toHaveLength(MAX_PROGRESS_MESSAGE_CHARS);
  });
});

describe('progressRelay', () => {
  it('delivers until end() and swallows a listener that throws', () => {
    const seen: number[] = [];
    const relay = progressRelay((p) => {
      seen.push(p.progress);
      throw new Error('listener failure');
    });
    expect(() => relay.listener({ progress: 1 })).not.toThrow();
    relay.end();
    relay.listener({ progress: 2 });
    expect(seen).toEqual([1]);
  });
});
