--[[
  Claims the probe of a paused fleet for a status read (the poller's probe), as ACQUIRE does for
  a send: when the probe time has come, moves the next one ahead by the doubled backoff.

  Input:
    KEYS[1] send pause

  Output:
    -1 not paused
    0  paused, and not the probe time yet
    1  this caller probes
]]
local pauseKey = KEYS[1]

local probeAt = tonumber(redis.call('HGET', pauseKey, 'probeAt') or '0')
if probeAt == 0 then return -1 end
--- @include "includes/now"
if probeAt > now then return 0 end
local pause = redis.call('HMGET', pauseKey, 'backoffMs', 'maxBackoffMs')
local backoff = math.min(2 * tonumber(pause[1]), tonumber(pause[2]))
redis.call('HSET', pauseKey, 'probeAt', now + backoff, 'backoffMs', backoff)
return 1
