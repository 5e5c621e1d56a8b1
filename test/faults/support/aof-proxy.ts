import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { startTcpProxy } from './tcp-proxy.js';

/**
 * A TCP proxy in front of a Valkey that remembers how much of the AOF was surely written when each
 * WAITAOF answered: every time it forwards a WAITAOF reply, it records the size of the AOF's open
 * incr file. Valkey answers WAITAOF only after the fsync, so that size holds at least everything
 * fsynced then: cutting the file back to it after a SIGKILL leaves what a machine crash (the page
 * cache lost) would have left at best, for the writes the service waited for. Replies are matched
 * to commands by position on each connection (RESP parsed both ways), so a reply that only looks
 * like WAITAOF's never stands for it.
 *
 * The proxy also samples the size every 50 ms, for `REDIS_DURABILITY=none`, which never calls
 * WAITAOF: cut to the size of 1 s before a kill, it loses what `appendfsync everysec` may.
 */
export interface AofProxy {
  readonly url: string;
  /** The incr file's size when the last WAITAOF reply went through (0 before any). */
  lastWaitaofSize(): number;
  /** WAITAOF replies forwarded so far. */
  waitaofReplies(): number;
  /** The last sampled size at least `ms` old. */
  sizeAgo(ms: number): number;
  /** The incr file the sizes are of (the newest `appendonlydir/*.incr.aof`). */
  incrFile(): string;
  /**
   * After a restart: forgets the samples, and finds the incr file again (Valkey appends to the same
   * one after a restart; a new one starts its sizes from what it holds now).
   */
  reset(): void;
  close(): Promise<void>;
}

/** Starts the proxy in front of the Valkey at `target` whose data folder is `dir`. */
export async function startAofProxy(target: string, dir: string): Promise<AofProxy> {
  let file = newestIncr(dir);
  let lastSize = 0;
  let waitaofAnswers = 0;
  let samples: { at: number; size: number }[] = [];
  const sizeNow = () => {
    try {
      return statSync(file).size;
    } catch {
      return 0;
    }
  };
  const sampler = setInterval(() => {
    samples.push({ at: Date.now(), size: sizeNow() });
    if (samples.length > 200) samples = samples.slice(-100);
  }, 50);
  const proxy = await startTcpProxy(target, (client, upstream) => {
    // Replies come in the order of the commands: the n-th reply answers the n-th command.
    const waitaofs = new Set<number>();
    let sent = 0;
    let answered = 0;
    const commands = respValues((name) => {
      if (name?.toString('latin1').toUpperCase() === 'WAITAOF') waitaofs.add(sent);
      sent++;
    });
    const replies = respValues(() => {
      if (waitaofs.delete(answered)) {
        waitaofAnswers++;
        lastSize = sizeNow();
      }
      answered++;
    });
    client.on('data', (chunk: Buffer) => {
      commands(chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      // Recorded before the reply is passed on: the client cannot act on it before the size is.
      replies(chunk);
      client.write(chunk);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  return {
    url: proxy.url,
    lastWaitaofSize: () => lastSize,
    waitaofReplies: () => waitaofAnswers,
    sizeAgo(ms) {
      const before = Date.now() - ms;
      const old = samples.filter((s) => s.at <= before);
      return old.at(-1)?.size ?? 0;
    },
    incrFile() {
      // An AOF rewrite starts a new incr file: the sizes taken of the old one would cut nothing.
      if (newestIncr(dir) !== file) throw new Error(`the AOF was rewritten during the drill`);
      return file;
    },
    reset() {
      const found = newestIncr(dir);
      if (found !== file) lastSize = statSync(found).size;
      file = found;
      samples = [];
    },
    close: () => {
      clearInterval(sampler);
      return proxy.close();
    },
  };
}

/**
 * Reads a RESP2 byte stream (commands or replies), chunk by chunk, and calls `onValue` once per
 * complete top-level value, with the first bulk string of an array (a command's name).
 */
function respValues(onValue: (first: Buffer | undefined) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    let at = 0;
    for (;;) {
      const value = respValue(pending, at);
      if (!value) break;
      onValue(value.first);
      at = value.end;
    }
    pending = pending.subarray(at);
  };
}

/** One complete RESP2 value at `at`: where it ends and its first bulk string; or undefined. */
function respValue(buf: Buffer, at: number): { end: number; first?: Buffer } | undefined {
  const lineEnd = buf.indexOf('\r\n', at);
  if (lineEnd < 0) return undefined;
  const type = String.fromCharCode(buf[at] ?? 0);
  const n = Number(buf.toString('latin1', at + 1, lineEnd));
  const next = lineEnd + 2;
  if (type === '$') {
    if (n < 0) return { end: next };
    return next + n + 2 <= buf.length
      ? { end: next + n + 2, first: buf.subarray(next, next + n) }
      : undefined;
  }
  if (type !== '*' || n < 0) return { end: next };
  let end = next;
  let first: Buffer | undefined;
  for (let i = 0; i < n; i++) {
    const item = respValue(buf, end);
    if (!item) return undefined;
    if (i === 0) first = item.first;
    end = item.end;
  }
  return { end, first };
}

/** The open incr file of a multi-part AOF: the highest-numbered `appendonlydir/*.incr.aof`. */
function newestIncr(dir: string): string {
  const folder = join(dir, 'appendonlydir');
  const incr = readdirSync(folder)
    .filter((name) => name.endsWith('.incr.aof'))
    .sort((a, b) => sequence(a) - sequence(b));
  const last = incr.at(-1);
  if (!last) throw new Error(`no incr AOF file in ${folder}`);
  return join(folder, last);
}

function sequence(name: string): number {
  return Number(/\.(\d+)\.incr\.aof$/.exec(name)?.[1] ?? 0);
}
