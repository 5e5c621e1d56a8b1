/** The slot function ioredis routes cluster commands with (the package ships no types). */
declare module 'cluster-key-slot' {
  /** Redis Cluster's slot of `key`: CRC16 of its hash tag (or of the whole key), modulo 16384. */
  function calculateSlot(key: string | Buffer): number;
  export = calculateSlot;
}
