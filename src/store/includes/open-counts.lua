-- Per-project counts of the open follow-ups by state (the follow-ups page reads them), in one hash
-- per shard: field `q:<project>` queued, `s:<project>` sending, `t:<project>` sent or unsettled.
-- Every script that moves a record between those states calls countMove in the same step, so the
-- page reads the counts instead of walking the open follow-ups. The hash's key is the shard's
-- prefix and `counts:open`: `shardKeyOf(key, name)` builds it from a key of the same shard that
-- the script was given (`<prefix>:<name>`), so no caller's key list changes and it stays in the
-- shard's slot. A count that would go below zero (a hand edit) is dropped instead.
local COUNT_CLASS = {queued = 'q', sending = 's', sent = 't', unsettled = 't'}

local function shardKeyOf(key, name, wanted)
  return string.sub(key, 1, #key - #name) .. wanted
end

local function countAdd(countsKey, field, by)
  if redis.call('HINCRBY', countsKey, field, by) <= 0 then redis.call('HDEL', countsKey, field) end
end

local function countMove(countsKey, projectId, from, to)
  local a, b = from and COUNT_CLASS[from], to and COUNT_CLASS[to]
  if a == b or not projectId then return end
  if a then countAdd(countsKey, a .. ':' .. projectId, -1) end
  if b then countAdd(countsKey, b .. ':' .. projectId, 1) end
end
