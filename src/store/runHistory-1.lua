--[[
  Folds one observed run length into a project's run history (see store/run-history.ts): a
  decayed mean and variance (exponentially weighted), so the history follows a project whose runs
  change, in one short string that expires when unused.

  Input:
    KEYS[1] the project's run history: a string `runs mean variance noise at`

    ARGV[1] the run's length, ms
    ARGV[2] the weight of a new run (0..1)
    ARGV[3] the spread a first run is given (standard deviation / length)
    ARGV[4] how long the history lives after its last update, ms
    ARGV[5] the variance of the run's length as observed (its end lies in a gap), ms²
    ARGV[6] the most a run precise against the history weighs (ARGV[2]..1)
    ARGV[7] the least a run weighs (0..ARGV[2])
    ARGV[8] when the run was seen ended, ms (`at`)
    ARGV[9] 1: the run is still going, only known to be at least this long (it leaves `at` as it
      was: the run's end, told later, weighs as the run it is)

  Output: the new history, as stored
]]
local runMs, weight = tonumber(ARGV[1]), tonumber(ARGV[2])
local spread, ttlMs = tonumber(ARGV[3]), tonumber(ARGV[4])
local seenVar = tonumber(ARGV[5]) or 0
local maxWeight = tonumber(ARGV[6]) or weight
local minWeight, atMs = tonumber(ARGV[7]) or weight, tonumber(ARGV[8]) or 0
local going = ARGV[9] == '1'

--- @include "includes/clock"

local runs, mean, var, noise, lastAt
local stored = redis.call('GET', KEYS[1])
if stored then
  -- Without its time (written by hand): told long ago.
  local r, m, v, n, a = string.match(stored, '^(%S+) (%S+) (%S+) (%S+) ?(%S*)$')
  runs, mean, var, noise = tonumber(r), tonumber(m), tonumber(v), tonumber(n)
  lastAt = tonumber(a) or 0
end

if not runs or not mean or not var or not noise or runs < 1 or mean <= 0 or var < 0 then
  -- No history (or an unreadable one): this run alone, with an assumed spread.
  runs, mean, var = 1, runMs, math.max((runMs * spread) ^ 2, seenVar)
  noise = seenVar
else
  -- A young history's runs weigh alike (a running mean). After that a run weighs `weight` when it
  -- ends a mean run's length or more after the last one, less when sooner, down to `minWeight`:
  -- runs that end together end in the order of their lengths, and at full weight each, the
  -- history would keep the longest few of them.
  local since = atMs - lastAt
  -- A kept time ahead of Redis's own clock (a clock that stepped back, a failover to a node
  -- behind) would damp every run until the clock caught up: this run counts as apart, and from
  -- now on its time is kept (for a run still going, one mean run earlier: its end then counts as
  -- apart from it). A run read a while ago (its claim's time) simply counts as together.
  if lastAt > clockNow() then
    since, lastAt = mean, atMs
    if going then lastAt = atMs - mean end
  end
  local apart = math.min(1, math.max(0, since) / mean)
  local w = math.max(1 / (runs + 1), minWeight, weight * apart)
  -- The share of the variance that is only the gaps' (noise), not the runs' own spread, and that
  -- this run's end is known better than: that much more weight, so the history built through the
  -- growing schedule's wide gaps narrows within a few precisely seen runs.
  local sharper = 0
  if var > 0 then sharper = math.min(1, math.max(0, (noise - seenVar) / var)) end
  w = w + (math.max(w, maxWeight) - w) * sharper
  local diff = runMs - mean
  local step = w * diff
  mean = mean + step
  -- The observation's own uncertainty is added with its weight: ends seen through wide gaps keep
  -- the spread wide, however alike their midpoints.
  var = (1 - w) * (var + diff * step) + w * seenVar
  noise = math.min(var, (1 - w) * noise + w * seenVar)
  -- Capped: the count only says whether the history is young.
  runs = math.min(runs + 1, 1000000)
end

local keptAt = math.max(atMs, lastAt or 0)
if going and lastAt then keptAt = lastAt end
local value = string.format('%d %.1f %.1f %d %d', runs, mean, var, math.floor(noise + 0.5), keptAt)
redis.call('SET', KEYS[1], value, 'PX', ttlMs)
return value
