--[[
  Records that a send happened (state `sent`) or may have happened (`unsettled`) and starts
  tracking it. The send time is the intent's time: the job may have started any time after it.
  Only for the attempt that holds the intent (its token): a late answer of an earlier attempt
  changes nothing. A definite answer turns `unsettled` (marked by a rerun on this attempt's
  behalf, or by its own crash handling) into `sent`; run twice, it finds its own state and does
  nothing more.

  Input:
    KEYS[1] record
    KEYS[2] tracked set

    ARGV[1] dispatchId
    ARGV[2] new state: sent or unsettled
    ARGV[3] agent job as JSON ('' = none)
    ARGV[4] its status
    ARGV[5] seenActive (1/0)
    ARGV[6] firstDelayMs
    ARGV[7] attemptToken
    ARGV[8] when, by Redis's clock, the first read falls due (the worker knows that clock from
            ACQUIRE's `now`); 0 or absent = `firstDelayMs` from TIME

  Output:
    1  recorded, or already so
    0  the record had moved on (another state)
    -1 another attempt holds it
]]
local recordKey, trackedKey = KEYS[1], KEYS[2]
local dispatchId, newState, token = ARGV[1], ARGV[2], ARGV[7]

-- One read of the fields it decides on.
local stored = redis.call('HMGET', recordKey, 'state', 'attemptToken', 'sendingAt', 'seenActive')
local state = stored[1]
if state ~= 'sending' and state ~= 'unsettled' and state ~= 'sent' then return 0 end
if (stored[2] or '') ~= token then return -1 end
if state == newState then return 1 end
if state ~= 'sending' and not (state == 'unsettled' and newState == 'sent') then return 0 end
local at = tonumber(ARGV[8] or '0')
if at <= 0 or not stored[3] then
--- @include "includes/now"
  if at <= 0 then at = now + tonumber(ARGV[6]) end
  stored[3] = stored[3] or now
end
local sentAt = stored[3]
-- The poller may have seen the job active while the request was in flight: keep that.
local seenActive = ARGV[5]
if stored[4] == '1' then seenActive = '1' end
redis.call('HSET', recordKey, 'state', newState, 'sentAt', sentAt, 'job', ARGV[3],
  'lastStatus', ARGV[4], 'seenActive', seenActive, 'pollDelayMs', ARGV[6])
redis.call('ZADD', trackedKey, at, dispatchId)
return 1
