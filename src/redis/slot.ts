/**
 * Redis Cluster's key slot (CRC16-XMODEM of the hash tag, modulo 16384), computed here so the
 * shard layout can give shard `i` of `N` a hash tag in the `i`-th `N`th of the slot space: a
 * cluster whose masters own equal contiguous slot ranges (what `redis-cli --cluster create` and
 * most managed clusters set up) then holds `N / masters` shards on each master.
 */

/** Number of slots of a Redis Cluster. */
export const SLOTS = 16384;

const TABLE = Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit++)
    crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  return crc;
});

/** The slot of `key`: of its hash tag (the first non-empty `{...}`), or of the whole key. */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  const close = open === -1 ? -1 : key.indexOf('}', open + 1);
  const hashed = close > open + 1 ? key.slice(open + 1, close) : key;
  let crc = 0;
  for (const byte of Buffer.from(hashed, 'utf8'))
    crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ byte) & 0xff] ?? 0);
  return crc % SLOTS;
}

/**
 * The hash tag of shard `index` of `count` under `base`: `<base>:<index>`, or `<base>:<index>.<k>`
 * with the smallest `k` that puts its slot in the shard's share of the slot space.
 */
export function shardTag(base: string, index: number, count: number): string {
  const from = Math.floor((index * SLOTS) / count);
  const to = Math.floor(((index + 1) * SLOTS) / count);
  for (let k = 0; ; k++) {
    const tag = k === 0 ? `${base}:${index}` : `${base}:${index}.${k}`;
    const slot = keySlot(`{${tag}}`);
    if (slot >= from && slot < to) return tag;
  }
}
