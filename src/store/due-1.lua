--[[
  Claims the tracked dispatches due now, oldest first: each is moved `leaseMs` ahead, so a read
  still in flight at the next tick is not started twice, and one whose poller died is due again
  once the lease lapses. Acting on a read moves it again (reschedule) or removes it (finish).

  Input:
    KEYS[1] tracked set

    ARGV[1] limit
    ARGV[2] leaseMs

  Output: {now, nextAt, dispatchId...}
    nextAt: when the earliest dispatch still tracked falls due (claimed ones included, at the end
    of their lease), or -1 when nothing is tracked: the tick sleeps until then, not longer.
]]
local trackedKey = KEYS[1]
local limit, leaseMs = tonumber(ARGV[1]), tonumber(ARGV[2])

--- @include "includes/now"
local ids = redis.call('ZRANGEBYSCORE', trackedKey, '-inf', now, 'LIMIT', 0, limit)
-- One ZADD leases up to 1,000 of them (unpack's stack stays small): a command per batch, not one
-- per claimed dispatch.
local leased, members = now + leaseMs, {}
for i, id in ipairs(ids) do
  members[#members + 1] = leased
  members[#members + 1] = id
  if i % 1000 == 0 or i == #ids then
    redis.call('ZADD', trackedKey, 'XX', unpack(members))
    members = {}
  end
end
local earliest = redis.call('ZRANGE', trackedKey, 0, 0, 'WITHSCORES')
table.insert(ids, 1, now)
table.insert(ids, 2, tonumber(earliest[2] or '-1'))
return ids
