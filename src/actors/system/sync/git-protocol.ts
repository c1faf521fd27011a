/**
 * The two stateless-RPC exchanges a sync makes (gitprotocol-pack, gitprotocol-http):
 * - upload-pack: our wants (exactly the selected refs) and haves (what the repository already
 *   holds), `done`, then the packfile back — no multi_ack, so one round trip;
 * - receive-pack: ref update commands and a packfile, then the per-ref report-status.
 * Answers are read as streams under the caps of upstream-limits.ts; what the upstream says in
 * its own words (ERR packets, fatal side-band messages, unpack and ref failure reasons) is never
 * carried into our errors.
 */
import { FLUSH, PktReader, pktLine, pktText, sideBandData } from './pkt-line.js';
import { discover, pickCapabilities, request, type Advertisement, type Remote } from './git-remote.js';
import { GitProtocolError } from './sync-errors.js';
import { PULL_ANSWER_MAX_BYTES, PUSH_REPORT_MAX_BYTES } from './upstream-limits.js';

export const ZERO_OID = '0'.repeat(40);

export async function listUploadRefs(remote: Remote): Promise<Advertisement> {
  return discover(remote, 'git-upload-pack');
}

export async function listReceiveRefs(remote: Remote): Promise<Advertisement> {
  return discover(remote, 'git-receive-pack');
}

/** Asks for `wants` (non-empty) and hands the packfile, as it streams in, to `read`. */
export async function fetchPack<T>(remote: Remote, adv: Advertisement, wants: readonly string[], haves: readonly string[], read: (pack: AsyncIterable<Uint8Array>) => Promise<T>): Promise<T> {
  const caps = pickCapabilities(adv.capabilities, ['side-band-64k', 'ofs-delta', 'no-progress']);
  const sideBand = caps.includes('side-band-64k');
  const lines: Buffer[] = [];
  wants.forEach((oid, i) => lines.push(pktLine(i === 0 ? `want ${oid} ${caps.join(' ')}\n` : `want ${oid}\n`)));
  lines.push(FLUSH);
  for (const oid of haves) lines.push(pktLine(`have ${oid}\n`));
  lines.push(pktLine('done\n'));
  return request(remote, 'git-upload-pack', Buffer.concat(lines), { maxBytes: PULL_ANSWER_MAX_BYTES, what: 'pack' }, async (answer) => {
    const reader = new PktReader(answer);
    // The answer to `done`: ACK (a have was common) or NAK, then the pack.
    const ack = await reader.read();
    if (!ack) throw new GitProtocolError('the upstream ended the fetch without sending a pack');
    const text = pktText(ack);
    if (text.startsWith('ERR ')) throw new GitProtocolError('the upstream refused the fetch (it answered with an error packet)');
    if (!text.startsWith('ACK') && !text.startsWith('NAK')) throw new GitProtocolError('the upstream answered the fetch with something other than ACK or NAK');
    return read(sideBand ? sideBandData(reader) : reader.remaining());
  });
}

export interface RefCommand {
  ref: string;
  /** The remote's value now (null: create). */
  old: string | null;
  new: string;
}

/** Whether the remote updated a ref (its reasons for refusing are its own words, not kept). */
export interface RefReport {
  ok: boolean;
}

/** Sends the ref updates with their pack; returns the remote's verdict for each ref. */
export async function pushPack(remote: Remote, adv: Advertisement, commands: readonly RefCommand[], pack: Buffer): Promise<Map<string, RefReport>> {
  if (!adv.capabilities.has('report-status')) throw new GitProtocolError('the upstream does not report push results (no report-status)');
  const caps = pickCapabilities(adv.capabilities, ['report-status', 'side-band-64k', 'quiet']);
  const sideBand = caps.includes('side-band-64k');
  const lines: Buffer[] = commands.map((c, i) => pktLine(`${c.old ?? ZERO_OID} ${c.new} ${c.ref}${i === 0 ? `\0${caps.join(' ')}` : ''}\n`));
  lines.push(FLUSH, pack);
  return request(remote, 'git-receive-pack', Buffer.concat(lines), { maxBytes: PUSH_REPORT_MAX_BYTES, what: 'push report' }, async (answer) => {
    const outer = new PktReader(answer);
    const report = sideBand ? new PktReader(sideBandData(outer)) : outer;
    const results = new Map<string, RefReport>();
    const unpack = await report.read();
    if (!unpack) throw new GitProtocolError('the upstream sent no push report');
    if (pktText(unpack) !== 'unpack ok') throw new GitProtocolError('the upstream could not store the pushed objects (its unpack failed)');
    for (let line = await report.read(); line; line = await report.read()) {
      const text = pktText(line);
      if (text.startsWith('ok ')) results.set(text.slice(3), { ok: true });
      else if (text.startsWith('ng ')) {
        const rest = text.slice(3);
        const space = rest.indexOf(' ');
        results.set(space < 0 ? rest : rest.slice(0, space), { ok: false });
      }
    }
    for (const c of commands) if (!results.has(c.ref)) results.set(c.ref, { ok: false });
    return results;
  });
}
