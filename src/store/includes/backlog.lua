-- The backpressure check of REGISTER (see register-n.lua): nil when the call may register, else
-- its refusal, once every new follow-up of the call has its orphan marker. Takes REGISTER's
-- counts key, record keys, whether any existed, where ids start in them and the markers' life.
local function backlogRefusal(countsKey, records, anyExisted, idsFrom, markerMs)
  local n = #records
  local max = tonumber(ARGV[5])
  if max <= 0 then return nil end
  local markerName, prefix = ARGV[9], string.sub(KEYS[1], 1, -5)
  local new = {}
  for i = 1, n do
    if not (anyExisted and redis.call('EXISTS', records[i]) == 1) then new[#new + 1] = i end
  end
  local function refuse(reply)
    for _, i in ipairs(new) do
      local dispatchId = string.sub(records[i], idsFrom)
      redis.call('SET', prefix .. 'orphan:' .. dispatchId, '1', 'NX', 'PX', markerMs)
    end
    if markerName ~= '' then redis.call('SET', prefix .. markerName, '1', 'PX', 60000) end
    return reply
  end
  if markerName ~= '' and redis.call('EXISTS', prefix .. markerName) == 1 then
    return refuse({'backlog_full'})
  end
  local adding, order = {}, {}
  if ARGV[8] ~= '' then
    for projectId, count in pairs(cjson.decode(ARGV[8])) do
      adding[projectId] = count
      order[#order + 1] = projectId
    end
  end
  -- A follow-up repeated within the call (the same key twice) is counted once.
  local seen = {}
  for _, i in ipairs(new) do
    if not seen[records[i]] then
      seen[records[i]] = true
      local projectId = ARGV[10 * i]
      if not adding[projectId] then order[#order + 1] = projectId end
      adding[projectId] = (adding[projectId] or 0) + 1
    end
  end
  for _, projectId in ipairs(order) do
    local queued = tonumber(redis.call('HGET', countsKey, 'q:' .. projectId) or '0')
    local over = queued + adding[projectId] - max
    if over > 0 then
      local controls = prefix .. 'project:' .. #projectId .. '.' .. projectId
      local rate = redis.call('HMGET', controls, 'max', 'windowMs')
      local rateMax = tonumber(rate[1] or ARGV[6])
      local windowMs = tonumber(rate[2] or ARGV[7])
      local retryMs = math.max(1000, math.ceil(over * windowMs / rateMax))
      return refuse({'backlog_full', projectId, queued, adding[projectId], retryMs})
    end
  end
  return nil
end
