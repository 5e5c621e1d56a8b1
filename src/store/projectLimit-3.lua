--[[
  Sets or clears one project's own send limit, fleet-wide: ACQUIRE reads it (acquire-n.lua) in
  place of SEND_RATE_LIMIT from the next send on, counted on the same sliding-window log, so no
  window of the new limit holds more than its max, the sends made before the change included.

  Budget slots reserved under the old limit (members `r:<id>`) are dropped, and their dispatch
  ids returned for the caller to wake: they reserve again under the new limit, now, instead of
  sleeping until a slot of the old one and spending what the new limit may not allow.

  Input:
    KEYS[1] project controls
    KEYS[2] the project's budget log
    KEYS[3] set of controlled projects

    ARGV[1] projectId
    ARGV[2] the limit as written (`50/1h`); '' = clear it (SEND_RATE_LIMIT again)
    ARGV[3] max
    ARGV[4] windowMs, margin included
    ARGV[5] toleranceMs

  Output: {the previous limit as written ('' = none), {dispatch ids whose reserved slot was dropped}}
]]
local controlsKey, budgetKey, controlledKey = KEYS[1], KEYS[2], KEYS[3]
local projectId, limit = ARGV[1], ARGV[2]

local previous = redis.call('HGET', controlsKey, 'limit') or ''
if limit ~= '' then
  redis.call('HSET', controlsKey, 'limit', limit, 'max', ARGV[3], 'windowMs', ARGV[4],
    'toleranceMs', ARGV[5])
  redis.call('SADD', controlledKey, projectId)
else
  redis.call('HDEL', controlsKey, 'limit', 'max', 'windowMs', 'toleranceMs')
  if redis.call('EXISTS', controlsKey) == 0 then redis.call('SREM', controlledKey, projectId) end
end
local reserved = {}
for _, member in ipairs(redis.call('ZRANGE', budgetKey, 0, -1)) do
  if string.sub(member, 1, 2) == 'r:' then reserved[#reserved + 1] = member end
end
local ids = {}
for i = 1, #reserved, 500 do
  redis.call('ZREM', budgetKey, unpack(reserved, i, math.min(i + 499, #reserved)))
end
for i, member in ipairs(reserved) do ids[i] = string.sub(member, 3) end
return {previous, ids}
