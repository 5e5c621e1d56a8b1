--[[
  Fences claims of idempotency keys whose record was never written, in the shard they were made
  for (see store/claims.ts): a producer that claimed a key and died (or stalled) before its
  MULTI left a claim without a record, which would refuse the key to every other project for the
  claim's lifetime. Where the record exists, the claim is complete and stays. Where it does not,
  the claim's token is added to a set here, atomically with that check, so that a stalled producer's
  REGISTER under that token, arriving later, is refused (register-n.lua): once a claim is released,
  its record can never appear.

  Input (n: the number of claims; i from 1 to n):
    KEYS[2i - 1]  record of dispatch id i, in this shard
    KEYS[2i]      its released-claim marker, in this shard

    ARGV[1]       the marker's lifetime in ms
    ARGV[i + 1]   the token of the claim to release

  Output: per claim 1 fenced (the caller may replace the claim), 0 the record exists (keep it)
]]
local lifetimeMs = ARGV[1]
local answers = {}
for i = 1, #KEYS / 2 do
  local recordKey, releasedKey = KEYS[2 * i - 1], KEYS[2 * i]
  if redis.call('EXISTS', recordKey) == 1 then
    answers[i] = 0
  else
    redis.call('SADD', releasedKey, ARGV[i + 1])
    redis.call('PEXPIRE', releasedKey, lifetimeMs)
    answers[i] = 1
  end
end
return answers
