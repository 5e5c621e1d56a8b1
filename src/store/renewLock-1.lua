--[[
  Extends a lock (the poll tick's), if this holder still holds it.

  Input:
    KEYS[1] lock

    ARGV[1] holder's token
    ARGV[2] lockMs

  Output: 1 extended, 0 held by another or lapsed
]]
local lockKey = KEYS[1]
local token, lockMs = ARGV[1], ARGV[2]

if redis.call('GET', lockKey) == token then return redis.call('PEXPIRE', lockKey, lockMs) end
return 0
