import { describe, expect, it } from 'vitest';
import { retryDelayMs } from '../../src/webhooks/backoff.js';
import { newSecret, signature, webhookId } from '../../src/webhooks/signature.js';

describe('Standard Webhooks signing', () => {
  it("matches the reference libraries' test vector", () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    expect(
      signature(secret, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}'),
    ).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('makes secrets of 32 random bytes and webhook ids that hold no colon', () => {
    const secret = newSecret();
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    expect(newSecret()).not.toBe(secret);
    expect(webhookId('sub_1', 'a:b')).toMatch(/^msg_sub_1_[0-9a-f]{32}$/);
    expect(webhookId('sub_1', 'a:b')).toBe(webhookId('sub_1', 'a:b'));
    expect(webhookId('sub_2', 'a:b')).not.toBe(webhookId('sub_1', 'a:b'));
  });
});

describe('the retry backoff', () => {
  const maxAge = 24 * 3_600_000;
  it('doubles from about 1 s, with jitter, up to 30 minutes', () => {
    expect(retryDelayMs(1, 0, maxAge, 0, () => 0)).toBe(500);
    expect(retryDelayMs(1, 0, maxAge, 0, () => 1)).toBe(1_000);
    expect(retryDelayMs(4, 0, maxAge, 0, () => 1)).toBe(8_000);
    expect(retryDelayMs(40, 0, maxAge, 0, () => 1)).toBe(1_800_000);
  });
  it('keeps one last attempt at the max age, then stops', () => {
    expect(retryDelayMs(20, 0, maxAge, maxAge - 1_000, () => 1)).toBe(1_000);
    expect(retryDelayMs(1, 0, maxAge, maxAge, () => 1)).toBe(-1);
  });
});
