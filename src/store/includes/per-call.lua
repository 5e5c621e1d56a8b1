-- A batched script's items (see store/call-batch.ts) mostly write the same shared keys: each
-- adds itself to the tracked set, or takes itself out of it and out of the open index. Those
-- writes take many members, so they go in one command per call, after the last item, instead of
-- one per item; nothing in a call reads what they write.
--
-- Each item answers for itself: one that raises an error (a key of the wrong type, a stored value
-- out of range: includes/guard.lua) answers that error, `ITEM <key> <why>`, and the others run as
-- each would alone. Its shared writes are dropped with it: they are queued for the call only once
-- the item completed. A shared key of the wrong type fails every item, before any write.
--- @include "includes/guard"
local pendingByCommand, pendingInOrder = {}, {}
-- The shared writes of the item running now.
local itemWrites = {}

-- Queues `command key ...members` for the end of the call; same command and key, one command.
local function later(command, key, ...)
  itemWrites[#itemWrites + 1] = {command, key, {...}}
end

-- The finished item's shared writes join the call's.
local function keepItemWrites()
  for _, write in ipairs(itemWrites) do
    local id = write[1] .. ' ' .. write[2]
    local pending = pendingByCommand[id]
    if not pending then
      pending = {command = write[1], key = write[2], args = {}}
      pendingByCommand[id] = pending
      pendingInOrder[#pendingInOrder + 1] = pending
    end
    for _, arg in ipairs(write[3]) do pending.args[#pending.args + 1] = arg end
  end
end

-- An error raised in an item as its reply; one of ours names its key, Redis's own does not.
local function itemReply(err)
  if type(err) == 'table' and err.item then
    return redis.error_reply('ITEM ' .. err.item .. ' ' .. err.why)
  end
  local text = type(err) == 'table' and tostring(err.err) or tostring(err)
  return redis.error_reply('ITEM - ' .. text)
end

-- Runs `item(i)` for i from 1 to n, each answered with its reply or its error, then the queued
-- writes, in the order first queued, members in the order given. `shared`: the call's keys
-- and their types, {key, type} each. A call carries at most 100 items (the caps in
-- acquire.ts, mark-sent.ts and finish.ts), so a write's 200 arguments at most fit in one
-- unpack (Lua's limit is about 8,000).
local function eachItem(n, item, shared)
  local replies = {}
  for _, key in ipairs(shared) do
    local ok, err = pcall(expectType, key[1], key[2])
    if not ok then
      for i = 1, n do replies[i] = itemReply(err) end
      return replies
    end
  end
  for i = 1, n do
    itemWrites = {}
    local ok, reply = pcall(item, i)
    if ok then
      keepItemWrites()
      replies[i] = reply
    else
      replies[i] = itemReply(reply)
    end
  end
  for _, pending in ipairs(pendingInOrder) do
    redis.call(pending.command, pending.key, unpack(pending.args))
  end
  return replies
end
