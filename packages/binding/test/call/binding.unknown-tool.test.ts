/**
 * `prepareCall` of a name the step did not advertise: `UNKNOWN_TOOL`, with the model names the
 * developer may have meant in `detail.matches`, and the model-facing text exactly as before.
 */
import { ErrorCode, isStepbindError, toToolResult } from '@stepbind/binding';
import { editDistance, nearestName, toolNameMatches } from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { harness } from './support.js';

function unknownTool(name: string): unknown {
  const { binding } = harness();
  try {
    binding.prepareCall(name);
  } catch (error) {
    return error;
  }
  throw new Error(`prepareCall("${name}") did not throw`);
}

describe('prepareCall: UNKNOWN_TOOL matches', () => {
  it('lists the prefixed model name whose tool part is the name asked for', () => {
    const error = unknownTool('send');
    expect(isStepbindError(error, ErrorCode.UNKNOWN_TOOL)).toBe(true);
    if (!isStepbindError(error, ErrorCode.UNKNOWN_TOOL)) return;
    expect(error.detail.matches).toEqual(['s__send']);
    expect(error.detail).toMatchObject({ modelName: 'send', delivery: 'not-sent' });
  });

  it('keeps the message and the model-facing text exactly as they were', () => {
    const error = unknownTool('send');
    expect((error as Error).message).toBe(
      'This step has no tool named "send". Call only the tools advertised in this step.',
    );
    expect(toToolResult(error).content[0].text).toBe(
      'There is no tool named "send" in this step. Use one of the tools you were given.',
    );
  });

  it('lists names within edit distance 2 (of the tool part or of the model name), nearest first', () => {
    const detail = (name: string): unknown =>
      (unknownTool(name) as { detail: { matches?: unknown } }).detail.matches;
    expect(detail('sned')).toEqual(['s__send']);
    expect(detail('s__repot')).toEqual(['s__report']);
    expect(detail('deploy')).toEqual([]);
  });

  it('orders exact tool parts first and never lists the asked name itself', () => {
    const tools = [
      { modelName: 'a__read_file', tool: 'read_file' },
      { modelName: 'b__read_fil', tool: 'read_fil' },
      { modelName: 'c__write', tool: 'write' },
    ];
    expect(toolNameMatches('read_fil', tools)).toEqual(['b__read_fil', 'a__read_file']);
    expect(toolNameMatches('c__write', tools)).toEqual([]);
  });
});

describe('editDistance and nearestName', () => {
  it('computes the Levenshtein distance, capped one past the limit', () => {
    expect(editDistance('config', 'config')).toBe(0);
    expect(editDistance('confg', 'config')).toBe(1);
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('kitten', 'sitting', 5)).toBe(3);
    expect(editDistance('a', 'abcdefgh')).toBe(3);
  });

  it('finds the nearest known name case-insensitively, or none past distance 2', () => {
    expect(nearestName('--jsno', ['--json', '--journal'])).toBe('--json');
    expect(nearestName('--CONFIG', ['--config'])).toBe('--config');
    expect(nearestName('--verbose', ['--json'])).toBeUndefined();
  });
});
