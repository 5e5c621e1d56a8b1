export { createProducer, InvalidFollowUpError, RedisUnavailableError } from './producer.js';
export type { Producer, ProducerOptions, SendResult } from './producer.js';
