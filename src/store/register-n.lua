--[[
  Registers a batch of follow-ups, in order: per follow-up its record and its place in its lane
  (see includes/lane.lua). A follow-up that makes a lane of one (most do) is found through its
  project's lane heads: the project is named in the lane projects set. One that joins a lane of
  two or more is added to the open index (scored by the batch's enqueue time) until FINISH, and so
  is the head that moves into the lane's list with it (scored by its own). The two are how the
  repair sweep finds every follow-up not finished yet (see store/open-index.ts).

  The producer runs it once per thousand follow-ups of a batch (`REGISTER_CHUNK`), in the MULTI
  beside BullMQ's job adds, so a thousand follow-ups cost one script call, one TIME, one EXISTS,
  one MSET (the prompts), one ZADD of their projects and one of the open index, and an HSET each
  and their places in their lanes (an EXISTS and an HSETNX each, or an RPUSH into a lane of two
  or more).

  The prompt goes under its own key, so that every field of the record stays short enough for
  Redis to keep the record as a listpack. The digest outlives the prompt (FINISH deletes that),
  so a conflict is seen until the record expires; a record without one (sent without an
  idempotency key, whose random id is never registered twice) counts as the same.

  Input (n: the number of follow-ups; i from 1 to n; m: those with a claim token):
    KEYS[1]      open index
    KEYS[2]      lane projects
    KEYS[4i - 1] record of follow-up i
    KEYS[4i]     lane heads of follow-up i's project (a lane of one)
    KEYS[4i + 1] lane of follow-up i (a lane of two or more)
    KEYS[4i + 2] prompt of follow-up i
    then, for the j-th follow-up with a claim token (j from 1 to m):
    KEYS[4n + 2j + 1] its released claims (see claimFence-n.lua)
    KEYS[4n + 2j + 2] its orphan marker (see publishOrphan-5.lua)

    ARGV[1]      key prefix of records: a record's key is it and the dispatch id
    ARGV[2]      key prefix of lane heads: a project's name in KEYS[2] is its key without it
    ARGV[3]      n
    ARGV[4]      lifetime of an orphan marker in ms (the dispatch retention)
    ARGV[5]      PROJECT_BACKLOG_MAX: queued follow-ups a project may have (0 = no limit)
    ARGV[6]      SEND_RATE_LIMIT's max and ARGV[7] its window in ms, for the retry estimate of a
    ARGV[7]      project without a limit of its own
    ARGV[8]      JSON {projectId: follow-ups of the batch in later REGISTER calls} ('' = none)
    ARGV[9]      name of the batch's refusal marker ('' = the batch is one call)
    ARGV[9i + 1] projectId
    ARGV[9i + 2] jobId
    ARGV[9i + 3] prompt
    ARGV[9i + 4] idempotency key ('' = none)
    ARGV[9i + 5] meta as JSON ('' = none)
    ARGV[9i + 6] digest of the content, computed by the producer ('' = none: no key)
    ARGV[9i + 7] W3C traceparent of the producer's span ('' = not traced)
    ARGV[9i + 8] token of the key's claim across shards ('' = none: one shard, or no key)
    ARGV[9i + 9] deadline: epoch ms, `+<ms>` from now (a ttl), or '' (none); see dispatch/deadline.ts

  A follow-up whose claim was released (its producer stalled past the claim's repair, see
  store/claims.ts) is not registered, and its orphan marker is set: the BullMQ job that the
  same MULTI adds finds no record and ends without an event (it was never accepted).

  Backpressure (ARGV[5] > 0): a project's queued follow-ups (the open counts, see
  includes/open-counts.lua) plus the new ones of the whole batch must stay within the max, or
  nothing of the call is registered. A project's follow-ups all live in one shard, so the shard's
  count is the project's. The follow-ups of later calls of the same MULTI (a batch of more than
  `REGISTER_CHUNK`) are counted from ARGV[8]: when the first call passes, so do the others; when
  it refuses, it sets the refusal marker (one minute) and every later call refuses too. Each new
  follow-up of a refused call gets its orphan marker: the BullMQ job the MULTI adds for it ends
  without an event. Output then: {'backlog_full', projectId, queued, new, retry ms} (the first
  project over; retry: the sends its rate lets through in that time drain the excess, at least
  1 s), or {'backlog_full'} from a later call.

  Output: one answer per follow-up, in order:
    1  registered
    0  this id exists with the same digest (deduplicated)
    -1 this id exists with another digest: the key was used for a different follow-up
    -2 not registered: its claim was released (retry the send)
]]
local openKey, projectsKey, recordPrefix = KEYS[1], KEYS[2], ARGV[1]
local idsFrom, namesFrom = #recordPrefix + 1, #ARGV[2] + 1
local n, markerMs = tonumber(ARGV[3]), ARGV[4]
-- The next of the keys that follow-ups with a claim token have (two each, in order).
local claimKeysAt = 4 * n + 3
--- @include "includes/now"
--- @include "includes/lane-join"
-- The shard's counts of open follow-ups (see includes/open-counts.lua, left out: this script's
-- source goes with every producer MULTI), from the open index's key `<prefix>:open`.
local countsKey, queuedBy = string.sub(openKey, 1, -5) .. 'counts:open', {}
-- Written as text once: Redis formats a Lua number with printf each time it is passed.
local nowText = tostring(now)

-- Commands that take many keys or members take them a thousand at a time (Lua's unpack has a
-- limit, and a batch has none); their integer replies are summed.
local CHUNK = 1000
local function inChunks(command, key, items, width)
  local total = 0
  for first = 1, #items, CHUNK * width do
    local last = math.min(first + CHUNK * width - 1, #items)
    local reply
    if key then
      reply = redis.call(command, key, unpack(items, first, last))
    else
      reply = redis.call(command, unpack(items, first, last))
    end
    if type(reply) == 'number' then total = total + reply end
  end
  return total
end

-- One EXISTS for the whole batch: when none of its records exists (the usual case), no record
-- needs a look of its own. Records registered earlier in this batch are known by their digests.
local records = {}
for i = 1, n do records[i] = KEYS[4 * i - 1] end
local anyExisted = inChunks('EXISTS', nil, records, 1) > 0
local registered = {}

-- The answer for a record that exists: 0 the same content, -1 another.
local function existing(recordKey, digest)
  local stored = registered[recordKey]
  if stored == nil then stored = redis.call('HGET', recordKey, 'digest') end
  if stored and stored ~= '' and stored ~= digest then return -1 end
  return 0
end

local function addIfAny(fields, name, value)
  if value ~= '' then
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
end

--- @include "includes/backlog"
local refusal = backlogRefusal()
if refusal then return refusal end

local answers, opened, prompts, projects = {}, {}, {}, {}
for i = 1, n do
  local recordKey, headsKey, laneKey, promptKey =
    KEYS[4 * i - 1], KEYS[4 * i], KEYS[4 * i + 1], KEYS[4 * i + 2]
  -- Follow-up i's arguments are ARGV[a + 2] to ARGV[a + 10].
  local a = 9 * i - 1
  local dispatchId = string.sub(recordKey, idsFrom)
  local digest, traceparent, token = ARGV[a + 7], ARGV[a + 8], ARGV[a + 9]
  local releasedKey, markerKey
  if token ~= '' then
    releasedKey, markerKey = KEYS[claimKeysAt], KEYS[claimKeysAt + 1]
    claimKeysAt = claimKeysAt + 2
  end
  if registered[recordKey] ~= nil or
      (anyExisted and redis.call('EXISTS', recordKey) == 1) then
    answers[i] = existing(recordKey, digest)
  elseif releasedKey and redis.call('SISMEMBER', releasedKey, token) == 1 then
    redis.call('SET', markerKey, '1', 'NX', 'PX', markerMs)
    answers[i] = -2
  else
    local fields = {'projectId', ARGV[a + 2], 'jobId', ARGV[a + 3], 'state', 'queued',
      'enqueuedAt', nowText}
    -- Only the fields that hold something, in the same HSET: every reader takes a missing key,
    -- meta, digest or traceparent for none, and a missing count (attempts, polls) for 0.
    addIfAny(fields, 'key', ARGV[a + 5])
    addIfAny(fields, 'meta', ARGV[a + 6])
    addIfAny(fields, 'digest', digest)
    addIfAny(fields, 'traceparent', traceparent)
    -- The deadline as epoch ms; a ttl counts from this script's time, the fleet's one clock.
    local deadline = ARGV[a + 10]
    if string.sub(deadline, 1, 1) == '+' then
      deadline = string.format('%d', now + tonumber(string.sub(deadline, 2)))
    end
    addIfAny(fields, 'expiresAt', deadline)
    redis.call('HSET', recordKey, unpack(fields))
    prompts[#prompts + 1] = promptKey
    prompts[#prompts + 1] = ARGV[a + 4]
    local alone, moved = laneJoin(headsKey, laneKey, ARGV[a + 3], dispatchId)
    if alone then
      projects[headsKey] = true
    else
      opened[#opened + 1] = nowText
      opened[#opened + 1] = dispatchId
      if moved then
        local since = redis.call('HGET', recordPrefix .. moved, 'enqueuedAt') or nowText
        redis.call('ZADD', openKey, since, moved)
      end
    end
    registered[recordKey] = digest
    queuedBy[ARGV[a + 2]] = (queuedBy[ARGV[a + 2]] or 0) + 1
    answers[i] = 1
  end
end
-- One MSET of the new records' prompts, and one ZADD of those in a lane of two or more: they are
-- open from the same time.
inChunks('MSET', nil, prompts, 2)
inChunks('ZADD', openKey, opened, 2)
-- And one ZADD of the projects that have a new lane of one.
local named = {}
for headsKey in pairs(projects) do
  named[#named + 1] = 0
  named[#named + 1] = string.sub(headsKey, namesFrom)
end
inChunks('ZADD', projectsKey, named, 2)
for projectId, count in pairs(queuedBy) do
  redis.call('HINCRBY', countsKey, 'q:' .. projectId, count)
end
return answers
