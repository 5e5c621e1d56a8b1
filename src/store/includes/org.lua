-- The organization's budget (ORG_RATE_LIMIT, this shard's share of it), checked by ACQUIRE once the
-- project's own budget granted a send. A sliding-window log like the project's (one entry per send,
-- reservations `r:<id>` in the future), with one more rule for fairness: a project holds at most
-- one org reservation at a time (the holders hash: project → dispatch id). So the org's queue of
-- reservations takes the waiting projects in turn, in time order, and a project with a big backlog
-- cannot line up the whole org window ahead of the others. A follow-up only reserves an org slot
-- once its project budget grants it, so the project's own limit is never traded for the org's.
-- Nothing here raises: both keys are the call's shared keys, their types checked once per call,
-- and the log's latest entry is checked before the item's first write (orgCheck).

local orgKey, orgHoldersKey = KEYS[3], KEYS[4]
local orgMax, orgWindow, orgTolerance = 0, 0, 0
if ARGV[4] ~= '0' then
  orgMax = numberIn(orgKey, 'org max', ARGV[4], 1, MAX_SENDS, true)
  orgWindow = numberIn(orgKey, 'org windowMs', ARGV[5], 1, MAX_WINDOW_MS, true)
  orgTolerance = numberIn(orgKey, 'org toleranceMs', ARGV[6], 0, MAX_WINDOW_MS, false)
end

-- The org log's latest entry, checked to be in range (an entry written by hand): raises before
-- the item writes anything, naming the org log.
local function orgCheck()
  if orgMax > 0 then checkBudget(orgKey) end
end

local function orgKeep(latest)
  local ttl = math.ceil(latest - now + orgWindow + 60000)
  redis.call('PEXPIRE', orgKey, ttl)
  redis.call('PEXPIRE', orgHoldersKey, ttl)
end

-- An org slot for dispatch `id` of `projectId`, whose project budget granted it now: returns the
-- slot to spend (not later than now), or nil and until when to wait. `deadline`: a slot after it
-- is not reserved (as for the project's budget).
local function orgTake(id, projectId, deadline)
  redis.call('ZREMRANGEBYSCORE', orgKey, '-inf', now - orgWindow)
  local reservation = 'r:' .. id
  local reserved = redis.call('ZSCORE', orgKey, reservation)
  if reserved then
    reserved = tonumber(reserved)
    if reserved > now then return nil, reserved end
    redis.call('ZREM', orgKey, reservation)
    if redis.call('HGET', orgHoldersKey, projectId) == id then
      redis.call('HDEL', orgHoldersKey, projectId)
    end
    -- Woken in time: it spends its slot. Later, it is dropped and taken again, like the project's.
    if now - reserved <= orgTolerance then return reserved end
  end
  local n = redis.call('ZCOUNT', orgKey, '(' .. (now - orgWindow), '+inf')
  local last = now
  if n > 0 then last = tonumber(redis.call('ZRANGE', orgKey, -1, -1, 'WITHSCORES')[2]) end
  local slot = now
  if last > slot then slot = last end
  if n >= orgMax then
    local total = redis.call('ZCARD', orgKey)
    local pivot = tonumber(redis.call('ZRANGE', orgKey, total - orgMax, total - orgMax,
      'WITHSCORES')[2]) + orgWindow
    if pivot > slot then slot = pivot end
    local paced = last + math.ceil(orgWindow / orgMax)
    if paced > slot then slot = paced end
  end
  if slot <= now then return now end
  -- The project already holds a reservation in time: this one waits for the queue's end, by when
  -- that one was spent and the project's next turn can be reserved.
  local holder = redis.call('HGET', orgHoldersKey, projectId)
  if holder and holder ~= id then
    local held = redis.call('ZSCORE', orgKey, 'r:' .. holder)
    if held and tonumber(held) + orgTolerance >= now then
      if deadline and deadline < slot then return nil, deadline end
      return nil, slot
    end
  end
  if deadline and deadline < slot then return nil, deadline end
  redis.call('ZADD', orgKey, slot, reservation)
  redis.call('HSET', orgHoldersKey, projectId, id)
  orgKeep(slot)
  return nil, slot
end

-- Spends org slot `slot` for attempt `member` (`<id>:<attempt>`).
local function orgSpend(member, slot)
  redis.call('ZADD', orgKey, slot, member)
  local latest = tonumber(redis.call('ZRANGE', orgKey, -1, -1, 'WITHSCORES')[2])
  orgKeep(math.max(latest, slot))
end
