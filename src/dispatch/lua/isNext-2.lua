--[[
  Whether a dispatch is queued at the head of its lane, so it may be sent now.

  Input:
    KEYS[1] record
    KEYS[2] lane

    ARGV[1] dispatchId

  Output: 1 queued and at the head of its lane, else 0
]]
local recordKey, laneKey = KEYS[1], KEYS[2]
local dispatchId = ARGV[1]

if redis.call('HGET', recordKey, 'state') ~= 'queued' then return 0 end
if redis.call('LINDEX', laneKey, 0) == dispatchId then return 1 end
return 0
