--[[
  Moves tracked dispatches' next status reads ahead and stores what each read saw: the
  reschedules a poller asks for at about the same time, in one call (see store/reschedule.ts),
  each as if it ran alone, in the order given.

  Input:
    KEYS[1] tracked set
    KEYS[1 + i] the record of the i-th dispatch

    ARGV[1] how many dispatches (n)
    then, for each dispatch in turn:
      its id
      delayMs
      when, by Redis's clock, its read falls due (the poller knows that clock from DUE's `now`);
        0 = `delayMs` from TIME
      how many field/value arguments follow (an even count, 0 for none)
      the field/value pairs for its record

  Output: one 1 per dispatch, or 0 where it is no longer tracked (another poller finished it), or
  an error reply `ITEM <key> <why>` where its record is not a hash: it wrote nothing (see
  includes/per-call.lua)
]]
local trackedKey = KEYS[1]
local n = tonumber(ARGV[1])

--- @include "includes/clock"

--- @include "includes/per-call"

-- Where each dispatch's arguments start: each has a varying count of field/value pairs.
local starts, a = {}, 2
for i = 1, n do
  starts[i] = a
  a = a + 4 + tonumber(ARGV[a + 3])
end

local function reschedule(recordKey, a)
  local dispatchId = ARGV[a]
  local delayMs, at, count = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local first = a + 4
  -- The record is written after the tracked set: checked first, so a failure writes nothing.
  if count > 0 then expectType(recordKey, 'hash') end
  if at <= 0 then at = clockNow() + delayMs end
  -- XX CH: moved only while it is tracked, and the reply says whether it was. A reply of 0 from a
  -- tracked dispatch (its score was already that time) is told apart by ZSCORE, the rare case
  -- only.
  if redis.call('ZADD', trackedKey, 'XX', 'CH', at, dispatchId) == 0
    and not redis.call('ZSCORE', trackedKey, dispatchId) then
    return 0
  end
  -- The poller decided from a snapshot read before its GET; meanwhile MARK_SENT may have set
  -- seenActive from the send's answer. Seen active is a fact once true: a '0' is never written
  -- here (the poller sends only '1'), so a stored '1' stays without reading it first.
  local fields = {}
  for f = first, first + count - 1, 2 do
    if not (ARGV[f] == 'seenActive' and ARGV[f + 1] ~= '1') then
      fields[#fields + 1] = ARGV[f]
      fields[#fields + 1] = ARGV[f + 1]
    end
  end
  if #fields > 0 then redis.call('HSET', recordKey, unpack(fields)) end
  return 1
end

return eachItem(n, function(i)
  return reschedule(KEYS[i + 1], starts[i])
end, {{trackedKey, 'zset'}})
