export {
  createProducer,
  IdempotencyConflictError,
  InvalidFollowUpError,
  RedisUnavailableError,
} from './producer.js';
export type { Producer, ProducerOptions, SendResult } from './producer.js';
export type { KeyConflict } from './errors.js';
