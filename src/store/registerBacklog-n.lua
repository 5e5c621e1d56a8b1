--[[
  REGISTER with the backpressure check of PROJECT_BACKLOG_MAX (includes/backlog.lua): the same
  keys, arguments and answers as register-n.lua, whose header describes them and the check.
]]
--- @include "includes/backlog"
--- @include "includes/register"
