--[[
  Moves a tracked dispatch's next status read `delayMs` ahead and stores what the read saw.

  Input:
    KEYS[1] record
    KEYS[2] tracked set

    ARGV[1] dispatchId
    ARGV[2] delayMs
    ARGV[3...] field/value pairs for the record

  Output: 1, or 0 when it is no longer tracked (another poller finished it)
]]
local recordKey, trackedKey = KEYS[1], KEYS[2]
local dispatchId, delayMs = ARGV[1], tonumber(ARGV[2])

if not redis.call('ZSCORE', trackedKey, dispatchId) then return 0 end
--- @include "includes/now"
redis.call('ZADD', trackedKey, 'XX', now + delayMs, dispatchId)
-- The poller decided from a snapshot read before its GET; meanwhile MARK_SENT may have set
-- seenActive from the send's answer. Seen active is a fact once true: never take it back.
-- One HSET: a field named twice takes its last value, so a stored '1' comes last.
local fields = {unpack(ARGV, 3)}
if redis.call('HGET', recordKey, 'seenActive') == '1' then
  table.insert(fields, 'seenActive'); table.insert(fields, '1')
end
if #fields > 0 then redis.call('HSET', recordKey, unpack(fields)) end
return 1
