/**
 * Writing upload-pack's response: pkt-lines (sync/pkt-line.ts) for the protocol's own lines, and
 * the pack itself on side-band — band 1 the pack bytes, band 2 progress, band 3 a fatal error —
 * or raw, for a v0 client that asked for no side-band (which then sees no progress).
 */
import { FLUSH, pktLine } from '../actors/system/sync/pkt-line.js';
import type { SideBand } from './fetch-request.js';

/** Where the response goes: `write` copies what it is given, `flush` sends it now, `ready` waits for room. */
export interface ByteSink {
  write(bytes: Uint8Array): void;
  flush(): void;
  ready(): Promise<void>;
}

const DELIM = Buffer.from('0001', 'latin1');

export class PktWriter {
  constructor(readonly sink: ByteSink) {}

  line(text: string): void {
    this.sink.write(pktLine(`${text}\n`));
  }

  flushPkt(): void {
    this.sink.write(FLUSH);
  }

  delim(): void {
    this.sink.write(DELIM);
  }

  /** An error git prints as `remote error: <message>` and then stops. */
  error(message: string): void {
    this.line(`ERR ${message}`);
  }
}

/** Largest payload of one pkt-line (65520 bytes in all) and of the old 1000-byte side-band. */
const BAND_DATA_64K = 65515;
const BAND_DATA_SMALL = 995;

export class PackChannel {
  private readonly frame: Buffer | null;
  private used = 0;

  constructor(
    private readonly sink: ByteSink,
    private readonly mode: SideBand,
    private readonly quiet: boolean,
  ) {
    this.frame = mode === 'none' ? null : Buffer.allocUnsafe(5 + (mode === 'side-band' ? BAND_DATA_SMALL : BAND_DATA_64K));
  }

  /** Pack bytes; copied, so a view valid only until the next read may be passed. */
  data(bytes: Uint8Array): void {
    const frame = this.frame;
    if (!frame) {
      this.sink.write(bytes);
      return;
    }
    let at = 0;
    while (at < bytes.length) {
      const n = Math.min(frame.length - 5 - this.used, bytes.length - at);
      frame.set(bytes.subarray(at, at + n), 5 + this.used);
      this.used += n;
      at += n;
      if (5 + this.used === frame.length) this.sendFrame();
    }
  }

  private sendFrame(): void {
    if (!this.frame || this.used === 0) return;
    const length = this.used + 5;
    this.frame.write(length.toString(16).padStart(4, '0'), 0, 'latin1');
    this.frame[4] = 1;
    this.sink.write(this.frame.subarray(0, length));
    this.used = 0;
  }

  /** A progress line (`\r`-terminated to update in place, `\n` to finish it), sent at once. */
  progress(text: string): void {
    if (this.quiet || !this.frame) return;
    this.sendFrame();
    this.sink.write(pktLine(Buffer.concat([Buffer.from([2]), Buffer.from(text, 'utf8')])));
    this.sink.flush();
  }

  /** A fatal error in the middle of the pack: git prints it and stops. */
  error(message: string): void {
    if (!this.frame) return;
    this.sendFrame();
    this.sink.write(pktLine(Buffer.concat([Buffer.from([3]), Buffer.from(`${message}\n`, 'utf8')])));
  }

  /** The pack is complete: the last frame, then the flush that ends a side-band stream. */
  end(): void {
    this.sendFrame();
    if (this.frame) this.sink.write(FLUSH);
  }
}
