--[[
  Pauses every send of the fleet after the agent API rejected the key (401/403) or redirected
  (3xx: `AGENT_API_URL` is wrong). Only the first rejection starts the pause (its caller logs it,
  once for the fleet); later ones find it on and change nothing. The first probe comes
  `firstBackoffMs` after the start. It stays until a probe gets another answer (no TTL: a
  rejected key stays rejected however long nobody sends).

  Input:
    KEYS[1] send pause

    ARGV[1] httpStatus
    ARGV[2] firstBackoffMs
    ARGV[3] maxBackoffMs

  Output: {started (1/0), probeAt}
]]
local pauseKey = KEYS[1]
local firstBackoff = tonumber(ARGV[2])

local probeAt = redis.call('HGET', pauseKey, 'probeAt')
if probeAt then return {0, tonumber(probeAt)} end
--- @include "includes/now"
redis.call('HSET', pauseKey, 'since', now, 'httpStatus', ARGV[1], 'probeAt', now + firstBackoff,
  'backoffMs', firstBackoff, 'maxBackoffMs', ARGV[3])
return {1, now + firstBackoff}
