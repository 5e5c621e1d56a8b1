/** `REDIS_DURABILITY`, parsed. `strict` (a trailing `!`) refuses to start without the guarantee. */
export type DurabilitySetting =
  | { readonly mode: 'none' }
  | { readonly mode: 'fsync'; readonly replicas: number; readonly strict: boolean };

/** Parses `fsync`, `fsync!`, `replicas:N`, `replicas:N!` or `none`; `undefined` when malformed. */
export function parseDurability(text: string): DurabilitySetting | undefined {
  const value = text.trim().toLowerCase();
  if (value === 'none') return { mode: 'none' };
  const match = /^(?:fsync|replicas:(\d{1,2}))(!?)$/.exec(value);
  if (!match) return undefined;
  return { mode: 'fsync', replicas: Number(match[1] ?? 0), strict: match[2] === '!' };
}
