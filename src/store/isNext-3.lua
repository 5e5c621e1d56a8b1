--[[
  Whether a dispatch is queued at the head of its lane, so it may be sent now.

  Input:
    KEYS[1] record
    KEYS[2] the project's lane heads (a lane of one; see includes/lane.lua)
    KEYS[3] lane (a lane of two or more)

    ARGV[1] dispatchId
    ARGV[2] jobId (the lane's field in KEYS[2])

  Output: 1 queued and at the head of its lane, else 0
]]
local recordKey, headsKey, laneKey = KEYS[1], KEYS[2], KEYS[3]
local dispatchId, jobId = ARGV[1], ARGV[2]

if redis.call('HGET', recordKey, 'state') ~= 'queued' then return 0 end
--- @include "includes/lane"
if laneHead(headsKey, laneKey, jobId) == dispatchId then return 1 end
return 0
