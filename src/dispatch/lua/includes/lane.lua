-- A lane: one agent job's follow-ups in enqueue order, sent one at a time. Its head (the one in
-- flight or next) is the field `jobId` of the project's heads hash (`headsKey`); the follow-ups
-- behind it wait in the list `laneKey`, which exists only while there are some. A lane of one is a
-- hash field, not a key of its own: most lanes hold one follow-up, and a list key costs about
-- twice as much memory. A lane that an earlier version wrote is a list headed by its head: the
-- first read moves that head into the hash.

-- The head of the lane, or nil when it is empty.
local function laneHead(headsKey, laneKey, jobId)
  local head = redis.call('HGET', headsKey, jobId)
  if head then return head end
  head = redis.call('LPOP', laneKey)
  if head then redis.call('HSET', headsKey, jobId, head) end
  return head
end

-- Drops the head: the first follow-up behind it becomes the head. Returns it, or nil.
local function laneAdvance(headsKey, laneKey, jobId)
  local nextId = redis.call('LPOP', laneKey)
  if nextId then
    redis.call('HSET', headsKey, jobId, nextId)
  else
    redis.call('HDEL', headsKey, jobId)
  end
  return nextId
end

-- Puts a follow-up at the end of the lane: its head when the lane is empty.
local function laneJoin(headsKey, laneKey, jobId, dispatchId)
  -- A list (behind a head, or an earlier version's lane) means the lane has a head already.
  if redis.call('EXISTS', laneKey) == 0 and
      redis.call('HSETNX', headsKey, jobId, dispatchId) == 1 then
    return
  end
  redis.call('RPUSH', laneKey, dispatchId)
end
