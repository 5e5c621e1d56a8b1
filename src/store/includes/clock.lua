-- Redis's clock in epoch milliseconds, one clock for the whole fleet, read at most once per call:
-- `clockNow()` reads TIME the first time it is asked, so a script that needs the time on some
-- paths only (a batched MARK_SENT or RESCHEDULE handed the time by the caller) reads it only then.
local clockMs = nil
local function clockNow()
  if not clockMs then
    local t = redis.call('TIME')
    clockMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return clockMs
end
