-- An item's own error (see includes/per-call.lua): a key of the wrong type, or a stored value no
-- sane write put there (a limit, a park, a score written into Redis by hand). Redis Lua cannot
-- undo a write, so each batched script reads and checks everything that could raise before the
-- item's first write: an item that fails has written nothing.

-- Raises the item's error, naming `key` and what is wrong with it.
local function itemError(key, why)
  error({item = key, why = why})
end

-- Raises unless `key` is absent or of `kind` (as TYPE names it: hash, zset, list, string, stream).
local function expectType(key, kind)
  local found = redis.call('TYPE', key)['ok']
  if found ~= 'none' and found ~= kind then
    itemError(key, 'WRONGTYPE holds a ' .. found .. ' where a ' .. kind .. ' belongs')
  end
end

-- `text` as a number from `low` to `high` (`whole`: an integer); else raises naming `key` and
-- `field`. NaN fails every comparison, so it is out of range too.
local function numberIn(key, field, text, low, high, whole)
  local value = tonumber(text)
  if not (value and value >= low and value <= high)
    or (whole and value ~= math.floor(value)) then
    itemError(key, 'out of range: ' .. field .. ' = ' .. string.sub(tostring(text), 1, 40))
  end
  return value
end

-- `redis.call(command, key, ...)`, its error raised as the item's, naming `key`.
local function callOn(command, key, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == 'table' and reply.err then itemError(key, reply.err) end
  return reply
end
