export { startPoller, POLL_SCHEDULER_ID, type PollerOptions } from './role.js';
