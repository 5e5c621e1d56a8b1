--[[
  Pauses or resumes one project, fleet-wide: ACQUIRE reads the flag (acquire-n.lua), so from the
  next ACQUIRE on no worker sends to a paused project, and nothing is spent (no attempt, no budget).
  Its follow-ups' BullMQ jobs are parked and noted in KEYS[2]; a resume takes that set, for the
  caller to wake them at once. Sent follow-ups are not touched: their status reads go on.

  Input:
    KEYS[1] project controls
    KEYS[2] the project's parked BullMQ jobs
    KEYS[3] set of controlled projects

    ARGV[1] projectId
    ARGV[2] 1 = pause, 0 = resume

  Output:
    pause:  {1 if this call paused it (0: it already was), pausedAt}
    resume: {1 if this call resumed it (0: it was not paused), {BullMQ job ids to wake}}
]]
local controlsKey, parkedKey, controlledKey = KEYS[1], KEYS[2], KEYS[3]
local projectId, pause = ARGV[1], ARGV[2] == '1'

local paused = redis.call('HGET', controlsKey, 'paused') == '1'
--- @include "includes/now"
if pause then
  if paused then return {0, tonumber(redis.call('HGET', controlsKey, 'pausedAt') or '0')} end
  redis.call('HSET', controlsKey, 'paused', '1', 'pausedAt', now)
  redis.call('SADD', controlledKey, projectId)
  return {1, now}
end
redis.call('HDEL', controlsKey, 'paused', 'pausedAt')
if redis.call('EXISTS', controlsKey) == 0 then redis.call('SREM', controlledKey, projectId) end
local parked = redis.call('SMEMBERS', parkedKey)
redis.call('DEL', parkedKey)
return {paused and 1 or 0, parked}
