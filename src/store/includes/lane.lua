-- A lane: one agent job's follow-ups in enqueue order, sent one at a time, head first. A lane of
-- one follow-up (most lanes) is the field `jobId` of its project's lane heads hash (`headsKey`):
-- a list key costs about twice as much memory. A lane of two or more is the list `laneKey`, head
-- first, and no field (see includes/lane-join.lua).

-- The head of the lane, or false when it is empty.
local function laneHead(headsKey, laneKey, jobId)
  return redis.call('HGET', headsKey, jobId) or redis.call('LINDEX', laneKey, 0)
end

-- Drops the lane's head. Answers the next one, or false when none follows (a lane of one).
local function laneAdvance(headsKey, laneKey, jobId)
  if redis.call('HDEL', headsKey, jobId) == 1 then return false end
  redis.call('LPOP', laneKey)
  return redis.call('LINDEX', laneKey, 0)
end
