/**
 * The head of a git push's request body (gitprotocol-pack, "Reference Update Request"): one
 * pkt-line per ref update, `<old-oid> <new-oid> <ref>`, the first carrying the client's
 * capabilities after a NUL, then a flush; with `push-options`, option lines and another flush.
 * The packfile follows (unless every update is a deletion), read from the same stream.
 *
 * What is wrong here is a protocol error (git prints `remote error: …`); what is wrong with one
 * ref (its name, its namespace) is that ref's refusal, decided later by the repository.
 */
import type { PktReader } from '../actors/system/sync/pkt-line.js';
import { GitProtocolError } from '../actors/system/sync/sync-errors.js';

export const ZERO_OID = '0'.repeat(40);

export interface RefUpdate {
  ref: string;
  /** ZERO_OID: the client believes the ref does not exist. */
  old: string;
  /** ZERO_OID: delete the ref. */
  new: string;
}

/** The capabilities a client asked for that change what the server answers. */
export interface PushCapabilities {
  reportStatus: boolean;
  sideBand: boolean;
  atomic: boolean;
  quiet: boolean;
}

export interface PushRequestHead {
  updates: RefUpdate[];
  capabilities: PushCapabilities;
  pushOptions: string[];
}

/** Bytes of commands and options (100,000 ref updates fit), updates, and push options, at most. */
const MAX_HEAD_BYTES = 16 * 1024 * 1024;
const MAX_UPDATES = 100_000;
const MAX_PUSH_OPTIONS = 100;

const COMMAND = /^([0-9a-f]{40}) ([0-9a-f]{40}) (\S+)$/;

/** A request git's client would never send: answered with an `ERR` line, which git prints. */
export class PushProtocolError extends Error {
  constructor(message: string) {
    super(`protocol error: ${message}`);
    this.name = 'PushProtocolError';
  }
}

const protocolError = (message: string): Error => new PushProtocolError(message);

/** Reads the packets of one section, up to its flush; null when the body ends first. */
async function section(reader: PktReader, budget: { bytes: number }, what: string): Promise<string[] | null> {
  const lines: string[] = [];
  for (;;) {
    let packet: Buffer | null | undefined;
    try {
      packet = await reader.read();
    } catch (err) {
      if (err instanceof GitProtocolError) throw protocolError(`malformed pkt-line in the ${what}`);
      throw err;
    }
    if (packet === undefined) {
      if (lines.length === 0) return null;
      throw protocolError(`the ${what} end without a flush`);
    }
    if (packet === null) return lines;
    budget.bytes -= packet.length + 4;
    if (budget.bytes < 0) throw protocolError(`the ${what} exceed ${MAX_HEAD_BYTES} bytes`);
    lines.push(packet.toString('utf8').replace(/\n$/, ''));
  }
}

/**
 * Reads the update commands and push options from `reader`; null when the body holds nothing
 * but a flush (a client with nothing to update). The reader is left at the start of the pack.
 */
export async function readPushRequestHead(reader: PktReader): Promise<PushRequestHead | null> {
  const budget = { bytes: MAX_HEAD_BYTES };
  const lines = await section(reader, budget, 'commands');
  if (lines === null || lines.length === 0) return null;
  if (lines.length > MAX_UPDATES) throw protocolError(`more than ${MAX_UPDATES} ref updates`);
  const [first, ...rest] = lines;
  const nul = first!.indexOf('\0');
  const requested = new Set(nul < 0 ? [] : first!.slice(nul + 1).split(' ').filter(Boolean));
  const updates: RefUpdate[] = [];
  const seen = new Set<string>();
  for (const line of [nul < 0 ? first! : first!.slice(0, nul), ...rest]) {
    const m = COMMAND.exec(line);
    if (!m) throw protocolError(`expected "<old-oid> <new-oid> <ref>", got ${JSON.stringify(line.slice(0, 120))}`);
    const [, old, next, ref] = m;
    if (seen.has(ref!)) throw protocolError(`the ref ${ref} is updated twice`);
    seen.add(ref!);
    updates.push({ ref: ref!, old: old!, new: next! });
  }
  let pushOptions: string[] = [];
  if (requested.has('push-options')) {
    pushOptions = (await section(reader, budget, 'push options')) ?? [];
    if (pushOptions.length > MAX_PUSH_OPTIONS) throw protocolError(`more than ${MAX_PUSH_OPTIONS} push options`);
  }
  return {
    updates,
    capabilities: {
      reportStatus: requested.has('report-status'),
      sideBand: requested.has('side-band-64k'),
      atomic: requested.has('atomic'),
      quiet: requested.has('quiet'),
    },
    pushOptions,
  };
}
