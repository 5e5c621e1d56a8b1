-- A lane: one agent job's follow-ups in enqueue order, sent one at a time, head first. A lane of
-- one follow-up (most lanes) is the field `jobId` of its project's lane heads hash (`headsKey`):
-- a list key costs about twice as much memory. A lane of two or more is the list `laneKey`, head
-- first, as earlier versions kept every lane, so a worker of an earlier version reads it right.
-- (A field beside a list is a lane of one that an earlier version's producer pushed onto: the
-- field is the head, the list is behind it.)

-- The head of the lane, or false when it is empty; and true when the head is the list's (a lane
-- of two or more), not a field.
local function laneHead(headsKey, laneKey, jobId)
  local field = redis.call('HGET', headsKey, jobId)
  if field then return field, false end
  local first = redis.call('LINDEX', laneKey, 0)
  return first, first ~= false
end

-- Drops the lane's head. Answers the next one, or false when none follows or it is not known
-- here (behind a field: it finds its lane by itself).
local function laneAdvance(headsKey, laneKey, jobId)
  if redis.call('HDEL', headsKey, jobId) == 1 then return false end
  redis.call('LPOP', laneKey)
  return redis.call('LINDEX', laneKey, 0)
end
