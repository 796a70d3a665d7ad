import { describe, expect, it } from 'vitest';
import {
  InputRoundLog,
  MAX_INPUT_KEY_LENGTH,
  MAX_INPUT_REQUESTS_RECORDED,
  MAX_INPUT_ROUNDS_RECORDED,
  type InputRound,
} from '../../src/call/input-rounds.js';

describe('InputRoundLog', () => {
  it('gives no field at all when the server asked for nothing', () => {
    expect(new InputRoundLog().field()).toEqual({});
    expect('inputRounds' in new InputRoundLog().field()).toBe(false);
  });

  it('copies only key, kind and outcome (and stopped), so nothing else a caller attaches is recorded', () => {
    const log = new InputRoundLog();
    const leaky = {
      requests: [
        { key: 'k', kind: 'elicitation', outcome: 'answered', answer: { secret: 'hunter2' } },
      ],
      stopped: 'round-limit',
      message: 'Your password?',
    } as unknown as InputRound;
    log.add(leaky);
    const field = log.field();
    expect(field).toEqual({
      inputRounds: {
        count: 1,
        rounds: [
          {
            requests: [{ key: 'k', kind: 'elicitation', outcome: 'answered' }],
            stopped: 'round-limit',
          },
        ],
      },
    });
    expect(JSON.stringify(field)).not.toContain('hunter2');
    expect(Object.isFrozen(field.inputRounds)).toBe(true);
  });

  it('bounds keys, requests and rounds but keeps the exact count; unknown values become other / unanswered', () => {
    const log = new InputRoundLog();
    const requests = Array.from({ length: MAX_INPUT_REQUESTS_RECORDED + 5 }, (_, i) => ({
      key: `${'x'.repeat(MAX_INPUT_KEY_LENGTH)}-${i}`,
      kind: 'telepathy',
      outcome: 'maybe',
    })) as unknown as InputRound['requests'];
    for (let i = 0; i < MAX_INPUT_ROUNDS_RECORDED + 3; i++) log.add({ requests });
    const rounds = log.field().inputRounds;
    expect(rounds?.count).toBe(MAX_INPUT_ROUNDS_RECORDED + 3);
    expect(rounds?.rounds).toHaveLength(MAX_INPUT_ROUNDS_RECORDED);
    const first = rounds?.rounds[0]?.requests;
    expect(first).toHaveLength(MAX_INPUT_REQUESTS_RECORDED);
    expect(first?.[0]).toEqual({
      key: 'x'.repeat(MAX_INPUT_KEY_LENGTH),
      kind: 'other',
      outcome: 'unanswered',
    });
  });
});
