--[[
  Moves a tracked dispatch's next status read `delayMs` ahead and stores what the read saw.

  Input:
    KEYS[1] record
    KEYS[2] tracked set

    ARGV[1] dispatchId
    ARGV[2] delayMs
    ARGV[3] when, by Redis's clock, the read falls due (the poller knows that clock from DUE's
            `now`); 0 = `delayMs` from TIME
    ARGV[4...] field/value pairs for the record

  Output: 1, or 0 when it is no longer tracked (another poller finished it)
]]
local recordKey, trackedKey = KEYS[1], KEYS[2]
local dispatchId, delayMs = ARGV[1], tonumber(ARGV[2])

local at = tonumber(ARGV[3])
if at <= 0 then
--- @include "includes/now"
  at = now + delayMs
end
-- XX CH: moved only while it is tracked, and the reply says whether it was. A reply of 0 from a
-- tracked dispatch (its score was already that time) is told apart by ZSCORE, the rare case only.
if redis.call('ZADD', trackedKey, 'XX', 'CH', at, dispatchId) == 0
  and not redis.call('ZSCORE', trackedKey, dispatchId) then
  return 0
end
-- The poller decided from a snapshot read before its GET; meanwhile MARK_SENT may have set
-- seenActive from the send's answer. Seen active is a fact once true: a '0' is never written
-- here (the poller sends only '1'), so a stored '1' stays without reading it first.
local fields = {}
for i = 4, #ARGV, 2 do
  if not (ARGV[i] == 'seenActive' and ARGV[i + 1] ~= '1') then
    fields[#fields + 1] = ARGV[i]
    fields[#fields + 1] = ARGV[i + 1]
  end
end
if #fields > 0 then redis.call('HSET', recordKey, unpack(fields)) end
return 1
