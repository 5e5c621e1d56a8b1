export { createProducer, InvalidFollowUpError } from './producer.js';
export type { Producer, ProducerOptions, SendResult } from './producer.js';
