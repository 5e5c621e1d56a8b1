-- ACQUIRE's reads that could raise (includes/guard.lua), made before the item's first write, and
-- what is read at most once per call: the send pause, each project's controls and park, by key.

-- The largest window a limit may have (about 300 years): every time the budget log computes stays
-- an exact integer that Lua prints in full and PEXPIRE takes.
local MAX_WINDOW_MS = 1e13
-- A park or probe time is at most that far ahead: a larger one (1e300, inf) would reach the worker
-- as an integer reply of -2^63, a wait already over, retried at once for ever.
local MAX_SENDS = 2147483647

local pauseRead = nil
local controlsOf, parkOf = {}, {}

-- A rate's max, window and tolerance, checked; `key` is named when one is out of range.
local function checkedRate(key, max, window, tolerance)
  return numberIn(key, 'max', max, 1, MAX_SENDS, true),
    numberIn(key, 'windowMs', window, 1, MAX_WINDOW_MS, true),
    numberIn(key, 'toleranceMs', tolerance, 0, MAX_WINDOW_MS, false)
end

-- The send pause: {probeAt, backoffMs, maxBackoffMs}; ACQUIRE moves probeAt as it probes. A key of
-- the wrong type fails this HMGET, the item's error before any write (no TYPE of its own); the
-- probe's HSET comes after it, in the same call.
local function readPause(pauseKey)
  if not pauseRead then
    local pause = callOn('HMGET', pauseKey, 'probeAt', 'backoffMs', 'maxBackoffMs')
    local probeAt = numberIn(pauseKey, 'probeAt', pause[1] or '0', 0, now + MAX_WINDOW_MS, false)
    pauseRead = {probeAt, 0, 0}
    if probeAt > 0 then
      pauseRead[2] = numberIn(pauseKey, 'backoffMs', pause[2], 0, MAX_WINDOW_MS, false)
      pauseRead[3] = numberIn(pauseKey, 'maxBackoffMs', pause[3], 0, MAX_WINDOW_MS, false)
    end
  end
  return pauseRead
end

-- The project's controls: {paused, max, windowMs, toleranceMs}, a limit's three checked.
local function readControls(controlsKey)
  local controls = controlsOf[controlsKey]
  if not controls then
    controls = callOn('HMGET', controlsKey, 'paused', 'max', 'windowMs', 'toleranceMs')
    if controls[2] then
      controls[2], controls[3], controls[4] =
        checkedRate(controlsKey, controls[2], controls[3], controls[4])
    end
    controlsOf[controlsKey] = controls
  end
  return controls
end

-- Until when the project is parked (0: it is not).
local function readPark(parkKey)
  local parked = parkOf[parkKey]
  if not parked then
    parked = numberIn(parkKey, 'park', callOn('GET', parkKey) or '0', 0, now + MAX_WINDOW_MS, false)
    parkOf[parkKey] = parked
  end
  return parked
end

-- The budget log's type and its latest entry: no later than a window or two ahead, so the times
-- computed from it stay exact (see MAX_WINDOW_MS). Returns that entry's score (nil: an empty log),
-- which ACQUIRE reuses until it writes the log.
local function checkBudget(budgetKey)
  local top = callOn('ZRANGE', budgetKey, -1, -1, 'WITHSCORES')[2]
  if top then return numberIn(budgetKey, 'latest entry', top, -math.huge, now + 3 * MAX_WINDOW_MS) end
  return nil
end

-- Whether dispatch `id` has no record or has ended (a record of the wrong type fails the read).
-- An ended head can still stand in a lane: an id registered again under its idempotency key after
-- its record was lost stands in the lane twice, and its FINISH hands on only one of the two.
local function gone(recordPrefix, id)
  local state = callOn('HGET', recordPrefix .. id, 'state')
  return not state or state == 'done'
end

-- Walks the lane without writing (as laneHead and laneAdvance would, includes/lane.lua; its reads
-- check the lane's keys): how many heads before this dispatch have no record or have ended, and
-- are to be dropped, then the head after them. Nothing follows a lane of one's head: once it is dropped,
-- LINDEX finds no list.
local function laneWalk(recordPrefix, headsKey, laneKey, jobId, dispatchId)
  local head = callOn('HGET', headsKey, jobId) or callOn('LINDEX', laneKey, 0)
  local drops = 0
  while head and head ~= dispatchId and gone(recordPrefix, head) do
    drops = drops + 1
    head = callOn('LINDEX', laneKey, drops)
  end
  return drops, head
end
