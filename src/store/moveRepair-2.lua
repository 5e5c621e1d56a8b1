--[[
  Moves the repair pass's cursor, or ends the pass, if the pass that began at ARGV[1] still runs
  (compare and set on `startedAt`): a poller whose page outlived its pass (a slow page, a pass
  ended and a new one begun meanwhile) writes nothing into the next pass, and never makes a pass
  hash again once it is gone. The end of a pass records its duration and end in KEYS[2], so any
  process can export them at scrape time.

  Input:
    KEYS[1] the running pass (hash: cursor, startedAt, endsAt, checked, ticks)
    KEYS[2] the last pass (hash: seconds, endedAt)

    ARGV[1] startedAt of the pass the caller sweeps
    ARGV[2] the cursor to go on from ('' = the pass is over)
    ARGV[3] open dispatches read since the last move
    ARGV[4] ticks to count (1 on a tick's first move, else 0)
    ARGV[5] TTL of the pass hash, ms

  Output: 1 moved or ended, 0 the pass is not the caller's
]]
local passKey, lastKey = KEYS[1], KEYS[2]
local startedAt, cursor, checked, ticks, ttlMs = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

if redis.call('HGET', passKey, 'startedAt') ~= startedAt then return 0 end
if cursor == '' then
  local time = redis.call('TIME')
  local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('DEL', passKey)
  redis.call('HSET', lastKey, 'seconds', (nowMs - tonumber(startedAt)) / 1000, 'endedAt', nowMs)
  return 1
end
redis.call('HSET', passKey, 'cursor', cursor)
redis.call('HINCRBY', passKey, 'checked', checked)
redis.call('HINCRBY', passKey, 'ticks', ticks)
redis.call('PEXPIRE', passKey, ttlMs)
return 1
