/**
 * What receive-pack answers a push (gitprotocol-pack, "Report Status"): `unpack ok` or
 * `unpack <reason>`, then `ok <ref>` or `ng <ref> <reason>` for every update, then a flush —
 * inside side-band 1 when the client asked for `side-band-64k`, so that git prints each refusal
 * as `! [remote rejected] <ref> (<reason>)` and an unpack failure as `remote unpack failed`.
 */
import { PackChannel, PktWriter, type ByteSink } from './response-writer.js';
import type { PushCapabilities } from './receive-request.js';

export interface RefStatus {
  ref: string;
  /** null: applied; else why not, in words git shows. */
  error: string | null;
}

/** A sink that keeps what is written, for answers built whole. */
export class CollectingSink implements ByteSink {
  private readonly parts: Buffer[] = [];

  write(bytes: Uint8Array): void {
    this.parts.push(Buffer.from(bytes));
  }

  flush(): void {}

  async ready(): Promise<void> {}

  bytes(): Buffer {
    return Buffer.concat(this.parts);
  }
}

/** A reason on one line (a pkt-line of report-status is one line). */
const oneLine = (text: string): string => text.replace(/[\r\n]+/g, ' ').trim();

export function reportStatus(capabilities: PushCapabilities, unpackError: string | null, refs: readonly RefStatus[]): Buffer {
  const out = new CollectingSink();
  if (!capabilities.reportStatus) {
    if (capabilities.sideBand) new PackChannel(out, 'side-band-64k', true).end();
    return out.bytes();
  }
  const report = new CollectingSink();
  const lines = new PktWriter(report);
  lines.line(unpackError === null ? 'unpack ok' : `unpack ${oneLine(unpackError)}`);
  for (const { ref, error } of refs) lines.line(error === null ? `ok ${ref}` : `ng ${ref} ${oneLine(error)}`);
  lines.flushPkt();
  if (!capabilities.sideBand) return report.bytes();
  const channel = new PackChannel(out, 'side-band-64k', true);
  channel.data(report.bytes());
  channel.end();
  return out.bytes();
}

/** A request that is not one git would send: git prints `remote error: <message>`. */
export function errorLine(message: string): Buffer {
  const out = new CollectingSink();
  new PktWriter(out).error(oneLine(message));
  return out.bytes();
}
