-- REGISTER's part of a lane (see includes/lane.lua), apart so that its source, sent with every
-- producer MULTI, holds only what it runs.

-- Puts a follow-up at the end of the lane: a field when the lane is empty; a second one moves
-- the lane into its list. Answers true when the follow-up is a lane of one (a field), else false
-- and, when the lane just moved into its list, the head that moved with it.
local function laneJoin(headsKey, laneKey, jobId, dispatchId)
  if redis.call('EXISTS', laneKey) == 0 then
    if redis.call('HSETNX', headsKey, jobId, dispatchId) == 1 then return true end
    local head = redis.call('HGET', headsKey, jobId)
    redis.call('HDEL', headsKey, jobId)
    redis.call('RPUSH', laneKey, head, dispatchId)
    return false, head
  end
  redis.call('RPUSH', laneKey, dispatchId)
  return false
end
