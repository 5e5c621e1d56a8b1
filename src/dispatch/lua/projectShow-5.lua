--[[
  Reads what an operator asks about one project, at one instant of Redis's clock: its controls,
  its budget in the window in force (as ACQUIRE counts it), when its next send slot opens, its 429
  park, and how many of its follow-ups are queued, being sent, and tracked. Changes nothing.

  The counts walk the open index (the follow-ups not finished in a lane of two or more, of every
  project), oldest first, then the project's lanes of one, at most ARGV[5] entries in all:
  `scanned` says how many were read, `open` how many there are; a count is exact when they are
  equal. A follow-up an earlier version put in both is counted once.

  Input:
    KEYS[1] project controls
    KEYS[2] the project's budget log
    KEYS[3] the project's park (429)
    KEYS[4] open index
    KEYS[5] the project's lane heads (its lanes of one)

    ARGV[1] default max (SEND_RATE_LIMIT)
    ARGV[2] default windowMs, margin included
    ARGV[3] the prefix of every record key
    ARGV[4] projectId
    ARGV[5] most open entries to read (0: none, no counts)

  Output: {now, paused (1/0), pausedAt, limit as written ('' = default), max, windowMs, sends in
    the window, reserved slots, next slot, parked until (0 = not), queued, sending, tracked,
    scanned, open}
]]
local controlsKey, budgetKey, parkKey, openKey, headsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4],
  KEYS[5]
local max, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local recordPrefix, projectId, cap = ARGV[3], ARGV[4], tonumber(ARGV[5])

--- @include "includes/now"
local controls = redis.call('HMGET', controlsKey, 'paused', 'pausedAt', 'limit', 'max', 'windowMs')
if controls[4] then max, window = tonumber(controls[4]), tonumber(controls[5]) end

local inWindow = redis.call('ZRANGEBYSCORE', budgetKey, '(' .. (now - window), '+inf', 'WITHSCORES')
local sends, reserved, last = 0, 0, now
for i = 1, #inWindow, 2 do
  if string.sub(inWindow[i], 1, 2) == 'r:' then reserved = reserved + 1 else sends = sends + 1 end
  last = math.max(last, tonumber(inWindow[i + 1]))
end
-- The slot a new follow-up would get, as ACQUIRE reckons it.
local n, slot = #inWindow / 2, last
if n >= max then
  local pivot = tonumber(inWindow[2 * (n - max) + 2]) + window
  slot = math.max(slot, pivot, last + math.ceil(window / max))
end
local parked = tonumber(redis.call('GET', parkKey) or '0')
if parked <= now then parked = 0 end

local queued, sending, tracked, scanned, seen = 0, 0, 0, 0, {}
local function count(id)
  scanned = scanned + 1
  if seen[id] then return end
  seen[id] = true
  local record = redis.call('HMGET', recordPrefix .. id, 'projectId', 'state')
  if record[1] == projectId then
    local state = record[2]
    if state == 'queued' then queued = queued + 1
    elseif state == 'sending' then sending = sending + 1
    elseif state == 'sent' or state == 'unsettled' then tracked = tracked + 1 end
  end
end
if cap > 0 then
  for _, id in ipairs(redis.call('ZRANGE', openKey, 0, cap - 1)) do count(id) end
end
local lanes = redis.call('HLEN', headsKey)
if cap - scanned >= lanes then
  for _, id in ipairs(redis.call('HVALS', headsKey)) do count(id) end
end
return {now, controls[1] == '1' and 1 or 0, tonumber(controls[2] or '0'), controls[3] or '', max,
  window, sends, reserved, slot, parked, queued, sending, tracked, scanned,
  redis.call('ZCARD', openKey) + lanes}
