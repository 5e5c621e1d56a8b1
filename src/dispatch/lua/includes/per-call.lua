-- A batched script's items (see dispatch/call-batch.ts) mostly write the same shared keys: each
-- adds itself to the tracked set, or takes itself out of it and out of the open index. Those
-- writes take many members, so they go in one command per call, after the last item, instead of
-- one per item; nothing in a call reads what they write.
--
-- `eachItem` runs the items and then those writes, even when an item raised an error (a key of
-- the wrong type, put there by hand): the items before it stand as each would alone, their
-- shared writes included, and the error is the call's answer, as before.
local pendingByCommand, pendingInOrder = {}, {}

-- Queues `command key ...members` for the end of the call; same command and key, one command.
local function later(command, key, ...)
  local id = command .. ' ' .. key
  local pending = pendingByCommand[id]
  if not pending then
    pending = {command = command, key = key, args = {}}
    pendingByCommand[id] = pending
    pendingInOrder[#pendingInOrder + 1] = pending
  end
  for _, arg in ipairs({...}) do pending.args[#pending.args + 1] = arg end
end

-- Runs `item(i)` for i from 1 to n, then the queued writes, in the order first queued, members in
-- the order given; the replies, or the error. A call carries at most 100 items (the caps in
-- dispatch/acquires.ts, marks.ts and finishes.ts), so a write's 200 arguments at most fit in one
-- unpack (Lua's limit is about 8,000).
local function eachItem(n, item)
  local replies = {}
  local ok, err = pcall(function()
    for i = 1, n do replies[i] = item(i) end
  end)
  for _, pending in ipairs(pendingInOrder) do
    redis.call(pending.command, pending.key, unpack(pending.args))
  end
  if ok then return replies end
  if type(err) == 'table' then return err end
  return redis.error_reply(tostring(err))
end
