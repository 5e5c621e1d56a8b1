--[[
  Releases a lock (the poll tick's), if this holder still holds it.

  Input:
    KEYS[1] lock

    ARGV[1] holder's token

  Output: 1 released, 0 held by another or lapsed
]]
local lockKey = KEYS[1]
local token = ARGV[1]

if redis.call('GET', lockKey) == token then return redis.call('DEL', lockKey) end
return 0
