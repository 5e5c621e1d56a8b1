--[[
  Reads what an operator asks about one project, at one instant of Redis's clock: its controls,
  its budget in the window in force (as ACQUIRE counts it), when its next send slot opens, its 429
  park, and how many of its follow-ups are queued, being sent, and tracked. Changes nothing.

  The counts are the ones the scripts keep per project (includes/open-counts.lua): exact, read at
  once; `scanned` and `open` are both their sum.

  Whatever the keys hold is read without failing: a key of the wrong type reads as empty, a limit
  whose max or window is not a positive number is counted with the default, and a score or park
  that is not a number is left out. Each such finding is named in the last element of the reply,
  for the caller to show (`invalid stored ...`); the stored fields come back as they are.

  Input:
    KEYS[1] project controls
    KEYS[2] the project's budget log
    KEYS[3] the project's park (429)
    KEYS[4] open index
    KEYS[5] the project's lane heads (its lanes of one; not read: the counts replace a walk)

    ARGV[1] default max (SEND_RATE_LIMIT)
    ARGV[2] default windowMs, margin included
    ARGV[3] the prefix of every record key
    ARGV[4] projectId
    ARGV[5] 0: no counts; else the counts are read

  Output: {now, then the stored controls as strings ('' = absent): paused, pausedAt, limit, max,
    windowMs; then max and windowMs counted with, sends in the window, reserved slots, next slot
    (a string: it may be past any integer), parked until (a string, '' = not parked), queued,
    sending, tracked, scanned, open, {findings}, then the stored toleranceMs}
]]
local controlsKey, budgetKey, parkKey, openKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local max, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local projectId, cap = ARGV[4], tonumber(ARGV[5])

--- @include "includes/now"
local findings = {}
-- Whether `key` holds a `kind` (false when it does not exist); a key of another type is a finding.
local function holds(key, kind, what)
  local found = redis.call('TYPE', key)['ok']
  if found == kind or found == 'none' then return found == kind end
  findings[#findings + 1] = what .. ' is a ' .. found .. ', not a ' .. kind
  return false
end
-- A number that every comparison below can use: finite and at least 1.
local function countable(value)
  local n = tonumber(value)
  if n and n == n and n >= 1 and n < math.huge then return n end
  return nil
end

local controls = {false, false, false, false, false, false}
if holds(controlsKey, 'hash', 'controls') then
  controls = redis.call('HMGET', controlsKey, 'paused', 'pausedAt', 'limit', 'max', 'windowMs',
    'toleranceMs')
end
if controls[4] or controls[5] then
  local m, w = countable(controls[4]), countable(controls[5])
  if m and w then max, window = m, w else findings[#findings + 1] = 'limit' end
end

local inWindow = {}
if holds(budgetKey, 'zset', 'budget log') then
  inWindow = redis.call('ZRANGEBYSCORE', budgetKey, '(' .. (now - window), '+inf', 'WITHSCORES')
end
local sends, reserved, last = 0, 0, now
for i = 1, #inWindow, 2 do
  if string.sub(inWindow[i], 1, 2) == 'r:' then reserved = reserved + 1 else sends = sends + 1 end
  local score = tonumber(inWindow[i + 1])
  if score and score < math.huge then last = math.max(last, score) end
end
-- The slot a new follow-up would get, as ACQUIRE reckons it.
local n, slot = #inWindow / 2, last
if n >= max then
  local pivot = (tonumber(inWindow[2 * (n - max) + 2]) or now) + window
  slot = math.max(slot, pivot, last + math.ceil(window / max))
end
local parked = ''
if holds(parkKey, 'string', 'park') then
  parked = redis.call('GET', parkKey)
  local parkedUntil = tonumber(parked)
  if parkedUntil and parkedUntil <= now then parked = '' end
end

-- The counts the scripts keep per project (includes/open-counts.lua), in the shard's hash beside
-- the open index (`<prefix>:open` → `<prefix>:counts:open`): exact, one read.
local queued, sending, tracked = 0, 0, 0
local countsKey = string.sub(openKey, 1, -5) .. 'counts:open'
if cap > 0 and holds(countsKey, 'hash', 'open counts') then
  local counts = redis.call('HMGET', countsKey, 'q:' .. projectId, 's:' .. projectId,
    't:' .. projectId)
  queued, sending, tracked = tonumber(counts[1]) or 0, tonumber(counts[2]) or 0,
    tonumber(counts[3]) or 0
end
local open = queued + sending + tracked
local scanned = open
local function text(value) return value or '' end
return {now, text(controls[1]), text(controls[2]), text(controls[3]), text(controls[4]),
  text(controls[5]), tostring(max), tostring(window), sends, reserved, tostring(slot), parked,
  queued, sending, tracked, scanned, open, findings, text(controls[6])}
