/**
 * git's pkt-line framing (gitprotocol-common): a 4-hex-digit length (including the 4 bytes) then
 * the payload; `0000` is a flush packet. Side-band-64k wraps data in pkt-lines whose first byte
 * names the band (1 pack data, 2 progress, 3 fatal error). Everything is read as a stream: at
 * most one packet (64 KiB) is held.
 */
import { GitProtocolError } from './sync-errors.js';

export const FLUSH = Buffer.from('0000', 'latin1');
const MAX_PKT_DATA = 65516;

export function pktLine(payload: string | Uint8Array): Buffer {
  const data = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : Buffer.from(payload);
  if (data.length > MAX_PKT_DATA) throw new Error('pkt-line payload too long');
  return Buffer.concat([Buffer.from((data.length + 4).toString(16).padStart(4, '0'), 'latin1'), data]);
}

/** A pull parser over an async byte stream: yields pkt-line payloads, `null` for a flush. */
export class PktReader {
  private buffer: Buffer = Buffer.alloc(0);
  private done = false;
  private readonly iterator: AsyncIterator<Uint8Array>;

  constructor(stream: AsyncIterable<Uint8Array>) {
    this.iterator = stream[Symbol.asyncIterator]();
  }

  private async fill(size: number): Promise<boolean> {
    while (this.buffer.length < size && !this.done) {
      const next = await this.iterator.next();
      if (next.done) this.done = true;
      else this.buffer = this.buffer.length ? Buffer.concat([this.buffer, next.value]) : Buffer.from(next.value);
    }
    return this.buffer.length >= size;
  }

  /** The next packet: its payload, `null` for a flush (or delimiter), `undefined` at end of stream. */
  async read(): Promise<Buffer | null | undefined> {
    if (!(await this.fill(4))) {
      if (this.buffer.length) throw new GitProtocolError('the remote sent a truncated response');
      return undefined;
    }
    const hex = this.buffer.toString('latin1', 0, 4);
    if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw new GitProtocolError('the remote sent a malformed response');
    const length = parseInt(hex, 16);
    if (length < 4) {
      this.buffer = this.buffer.subarray(4);
      return null;
    }
    if (!(await this.fill(length))) throw new GitProtocolError('the remote sent a truncated response');
    const payload = this.buffer.subarray(4, length);
    this.buffer = this.buffer.subarray(length);
    return payload;
  }

  /** Everything after the packets read so far, unframed (a packfile sent without side-band). */
  async *remaining(): AsyncGenerator<Uint8Array> {
    if (this.buffer.length) yield this.buffer;
    this.buffer = Buffer.alloc(0);
    for (;;) {
      const next = await this.iterator.next();
      if (next.done) break;
      yield next.value;
    }
    this.done = true;
  }
}

/** Text of a payload without its trailing newline. */
export function pktText(payload: Buffer): string {
  const text = payload.toString('utf8');
  return text.endsWith('\n') ? text.slice(0, -1) : text;
}

/**
 * The band-1 data of side-band-64k packets, until a flush or the end of the stream. Band 2 is
 * progress and is dropped; band 3 is the remote's fatal error, reported without its text, which
 * is the remote's and not ours to show.
 */
export async function* sideBandData(reader: PktReader): AsyncGenerator<Uint8Array> {
  for (let packet = await reader.read(); packet; packet = await reader.read()) {
    const band = packet[0];
    if (band === 1) yield packet.subarray(1);
    else if (band === 3) throw new GitProtocolError('the remote reported a fatal error on its side-band channel');
    else if (band !== 2) throw new GitProtocolError('the remote sent a malformed side-band packet');
  }
}
