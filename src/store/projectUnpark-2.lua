--[[
  Clears one project's 429 park (`project unpark`): from the next ACQUIRE on, its follow-ups may
  go again, within its budget. The BullMQ jobs that wait out the park noted themselves in KEYS[2]
  (see store/project-controls.ts); this takes that set, for the caller to wake them at once.

  Input:
    KEYS[1] the project's park (epoch ms)
    KEYS[2] the project's park waiters

  Output: {the park's end it cleared (0: it was not parked), {BullMQ job ids to wake}}
]]
local parkKey, waitersKey = KEYS[1], KEYS[2]
--- @include "includes/now"
local untilMs = tonumber(redis.call('GET', parkKey) or '0') or 0
redis.call('DEL', parkKey)
local waiting = redis.call('SMEMBERS', waitersKey)
redis.call('DEL', waitersKey)
if untilMs <= now then untilMs = 0 end
return {untilMs, waiting}
