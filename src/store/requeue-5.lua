--[[
  Puts a dispatch whose send certainly did not go through back to `queued`, from `sending` (a
  failed attempt) or `unsettled` (an operator-approved resend). `refund` gives the budget entry
  back when the request never left; `parkMs` parks the whole project (after a 429).
  A failed attempt stops being tracked: its BullMQ job retries it. A resend stays tracked and is
  marked, so the poller adds its new BullMQ job again if it died before adding it.
  Only for the attempt that holds the intent (its token).

  Input:
    KEYS[1] record
    KEYS[2] budget
    KEYS[3] park
    KEYS[4] tracked set
    KEYS[5] the org budget log (ORG_RATE_LIMIT): a refund gives its entry back too

    ARGV[1] dispatchId
    ARGV[2] attempt
    ARGV[3] refund (1/0; 2: refund, and the request was never written: the attempt does not
      count, so the event's `attempts` counts requests written only)
    ARGV[4] parkMs (0 = no park)
    ARGV[5] attemptToken
    ARGV[6] 1 when ORG_RATE_LIMIT is on (the org log holds the attempt too), else 0

  Output:
    the park deadline (0 when not parked)
    -1 the record was in another state
    -2 another attempt holds it
]]
local recordKey, budgetKey, parkKey, trackedKey, orgKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local dispatchId, attempt, refund, token = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
local parkMs, orgOn = tonumber(ARGV[4]), ARGV[6] == '1'

local state = redis.call('HGET', recordKey, 'state')
if state ~= 'sending' and state ~= 'unsettled' then return -1 end
if (redis.call('HGET', recordKey, 'attemptToken') or '') ~= token then return -2 end
--- @include "includes/open-counts"
local countsKey = shardKeyOf(trackedKey, 'tracked', 'counts:open')
-- A key of another type (a hand edit) fails the call before its first write, naming the key.
local shared = {{countsKey, 'hash'}, {budgetKey, 'zset'}}
if orgOn then shared[3] = {orgKey, 'zset'} end
--- @include "includes/wrong-type"
local wrong = wrongType(shared)
if wrong then return redis.error_reply(wrong) end
redis.call('HSET', recordKey, 'state', 'queued')
countMove(countsKey,
  redis.call('HGET', recordKey, 'projectId'), state, 'queued')
if state == 'sending' then
  redis.call('ZREM', trackedKey, dispatchId)
else
  redis.call('HSET', recordKey, 'resend', '1')
end
if refund ~= '0' then
  redis.call('ZREM', budgetKey, dispatchId .. ':' .. attempt)
  if orgOn then redis.call('ZREM', orgKey, dispatchId .. ':' .. attempt) end
end
if refund == '2' and redis.call('HGET', recordKey, 'attempts') == attempt then
  redis.call('HSET', recordKey, 'attempts', tonumber(attempt) - 1)
end
if parkMs <= 0 then return 0 end
--- @include "includes/now"
local untilMs = now + parkMs
local current = tonumber(redis.call('GET', parkKey) or '0')
if untilMs > current then
  redis.call('SET', parkKey, untilMs, 'PX', parkMs + 1000)
  return untilMs
end
return current
