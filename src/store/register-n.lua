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
    KEYS[4n + 2j + 2] its orphan marker (see publishOrphan-10.lua)

    ARGV[1]      key prefix of records: a record's key is it and the dispatch id
    ARGV[2]      key prefix of lane heads: a project's name in KEYS[2] is its key without it
    ARGV[3]      n
    ARGV[4]      lifetime of an orphan marker in ms (the dispatch retention)
    ARGV[5]      PROJECT_BACKLOG_MAX: queued follow-ups a project may have (0 = no limit)
    ARGV[6]      SEND_RATE_LIMIT's max and ARGV[7] its window in ms, for the retry estimate of a
    ARGV[7]      project without a limit of its own
    ARGV[8]      JSON {projectId: follow-ups of the batch in later REGISTER calls} ('' = none)
    ARGV[9]      name of the batch's refusal marker ('' = the batch is one call)
    ARGV[10i]     projectId
    ARGV[10i + 1] jobId (its lane; a creation's, see dispatch/creation.ts)
    ARGV[10i + 2] prompt
    ARGV[10i + 3] idempotency key ('' = none)
    ARGV[10i + 4] meta as JSON ('' = none)
    ARGV[10i + 5] digest of the content, computed by the producer ('' = none: no key)
    ARGV[10i + 6] W3C traceparent of the producer's span ('' = not traced)
    ARGV[10i + 7] token of the key's claim across shards ('' = none: one shard, or no key)
    ARGV[10i + 8] deadline: epoch ms, `+<ms>` from now (a ttl), or '' (none); see dispatch/deadline.ts
    ARGV[10i + 9] kind: '' a follow-up, `c` a creation, `a<dispatchId> <digest>` a follow-up
                  chained to that creation (the digest of the creation when it is of the same
                  batch, else ''; -3 when that creation's record holds another)

  A follow-up whose claim was released (its producer stalled past the claim's repair, see
  store/claims.ts) is not registered, and its orphan marker is set: the BullMQ job that the
  same MULTI adds finds no record and ends without an event (it was never accepted).

  Backpressure (registerBacklog-n.lua, the same script with the check, run when ARGV[5] > 0; this
  one, sent in every producer MULTI, leaves the check's source out): a project's queued follow-ups (the open counts, see
  includes/open-counts.lua) plus the new ones of the whole batch must stay within the max, or
  nothing of the call is registered. A project's follow-ups all live in one shard, so the shard's
  count is the project's. The follow-ups of later calls of the same MULTI (a batch of more than
  `REGISTER_CHUNK`) are counted from ARGV[8]: when the first call passes, so do the others; when
  it refuses, it sets the refusal marker (one minute) and every later call refuses too. Each new
  follow-up of a refused call gets its orphan marker: the BullMQ job the MULTI adds for it ends
  without an event. Output then: {'backlog_full', projectId, queued, new, retry ms} (the first
  project over; retry: the sends its rate lets through in that time drain the excess, at least
  1 s), or {'backlog_full'} from a later call.

  A key of the wrong type fails the call before its first write but the orphan markers of its
  new follow-ups (their jobs, added by the same MULTI, end without an event).

  Output: one answer per follow-up, in order:
    1  registered
    2  registered, and its id had an orphan marker (deleted): a job of an earlier send of the
       same key may have ended without it, so the producer checks that the id's job lives
    0  this id exists with the same digest (deduplicated)
    -1 this id exists with another digest: the key was used for a different follow-up
    -2 not registered: its claim was released (retry the send)
]]
-- PROJECT_BACKLOG_MAX unset: nothing to check (see registerBacklog-n.lua).
local function backlogRefusal() return nil end
--- @include "includes/register"
