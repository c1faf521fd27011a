/**
 * A git client's request body (what `git-upload-pack` reads), split into pkt-lines strictly: a
 * server must refuse what it cannot frame, not guess. Protocol v2 needs the special packets told
 * apart (`0000` flush, `0001` delimiter, `0002` response end), unlike the client-side reader in
 * sync/pkt-line.ts, which only ever reads whole responses. Bad framing is INVALID_REQUEST,
 * which upload-pack sends back as an `ERR` line for git to print.
 */
import { invalid } from '../errors.js';

export type Packet = { kind: 'data'; text: string } | { kind: 'flush' } | { kind: 'delim' } | { kind: 'response-end' };

const HEX4 = /^[0-9a-f]{4}$/;

export function splitPktLines(body: Buffer): Packet[] {
  const packets: Packet[] = [];
  let pos = 0;
  while (pos < body.length) {
    if (pos + 4 > body.length) throw invalid('protocol error: truncated pkt-line length');
    const head = body.toString('latin1', pos, pos + 4);
    if (!HEX4.test(head)) throw invalid(`protocol error: bad line length character: ${JSON.stringify(head)}`);
    const length = parseInt(head, 16);
    if (length === 0) packets.push({ kind: 'flush' });
    else if (length === 1) packets.push({ kind: 'delim' });
    else if (length === 2) packets.push({ kind: 'response-end' });
    else if (length < 4) throw invalid(`protocol error: bad line length ${length}`);
    else {
      if (pos + length > body.length) throw invalid('protocol error: truncated pkt-line');
      let end = pos + length;
      if (body[end - 1] === 0x0a) end--;
      packets.push({ kind: 'data', text: body.toString('utf8', pos + 4, end) });
      pos += length;
      continue;
    }
    pos += 4;
  }
  return packets;
}
