--[[
  Claims idempotency keys for the shard of their project, in one shard (the shard of each key's
  dispatch id, see store/claims.ts), in order: the first claim of a dispatch id decides which
  shard may register it, so two producers sending the same new key for projects of two shards
  cannot both be accepted. A claim outlives its record by design (its lifetime is renewed by each
  claim for the same shard), never the reverse while the follow-up is younger than the lifetime.

  Input (n: the number of claims; i from 1 to n):
    KEYS[i]        claim of dispatch id i

    ARGV[1]        the claim's lifetime in ms
    ARGV[3i - 1]   the shard of the project (a number, as text)
    ARGV[3i]       the token of this claim
    ARGV[3i + 1]   the token of a claim to replace ('' = none): a claim whose record was never
                   written, fenced in its own shard by the caller (claimFence-n.lua)

  Output: per claim {answer, token, ageMs, shard}:
    1  claimed now for that shard under this token
    0  already claimed for that shard: its token, its age (the record may not be written yet)
    -1 claimed for another shard: its token, its age, that shard
]]
local lifetimeMs = ARGV[1]
local now = redis.call('TIME')
local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)

local answers = {}
for i = 1, #KEYS do
  local claimKey = KEYS[i]
  local shard, token, replaces = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  local held = redis.call('HMGET', claimKey, 'shard', 'token', 'at')
  if not held[1] or (replaces ~= '' and held[2] == replaces) then
    redis.call('HSET', claimKey, 'shard', shard, 'token', token, 'at', nowMs)
    redis.call('PEXPIRE', claimKey, lifetimeMs)
    answers[i] = {1, token, 0, shard}
  else
    local age = nowMs - (tonumber(held[3]) or 0)
    if held[1] == shard then
      -- Renewed: a send of the key for the same project keeps its claim as long as its record.
      redis.call('PEXPIRE', claimKey, lifetimeMs)
      answers[i] = {0, held[2] or '', age, shard}
    else
      answers[i] = {-1, held[2] or '', age, held[1]}
    end
  end
end
return answers
