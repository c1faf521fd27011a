/**
 * What a git client asks upload-pack for, read from either protocol into one shape:
 * protocol v2 (`command=ls-refs` / `command=fetch`, gitprotocol-v2) and the v0 stateless-RPC
 * request of smart HTTP (wants with capabilities on the first line, then haves, gitprotocol-pack).
 * Anything the server did not advertise, or cannot parse, is INVALID_REQUEST with a message git
 * prints as `remote error: …`.
 */
import { invalid } from '../errors.js';
import type { Packet } from './pkt-request.js';

const OID = /^[0-9a-f]{40}$/;
/** git's "infinite" depth (`--unshallow` sends it). */
export const INFINITE_DEPTH = 0x7fffffff;

export type SideBand = 'none' | 'side-band' | 'side-band-64k';

export interface FetchRequest {
  wants: string[];
  haves: string[];
  done: boolean;
  /** The client's current shallow commits. */
  shallows: string[];
  /** 0 when not deepening; INFINITE_DEPTH to unshallow. */
  depth: number;
  deepenRelative: boolean;
  /** Unix seconds, or null. */
  deepenSince: number | null;
  /** Ref names (as the client wrote them) whose history is excluded. */
  deepenNot: string[];
  filter: string | null;
  includeTag: boolean;
  noProgress: boolean;
  sideBand: SideBand;
  /** v0 only: the acknowledgement mode and `no-done`. */
  multiAckDetailed: boolean;
  noDone: boolean;
}

export interface LsRefsRequest {
  symrefs: boolean;
  peel: boolean;
  unborn: boolean;
  prefixes: string[];
}

export type V2Command = { command: 'ls-refs'; args: LsRefsRequest } | { command: 'fetch'; args: FetchRequest };

function emptyFetch(): FetchRequest {
  return {
    wants: [],
    haves: [],
    done: false,
    shallows: [],
    depth: 0,
    deepenRelative: false,
    deepenSince: null,
    deepenNot: [],
    filter: null,
    includeTag: false,
    noProgress: false,
    sideBand: 'none',
    multiAckDetailed: false,
    noDone: false,
  };
}

function oidArg(line: string, prefix: string): string {
  const oid = line.slice(prefix.length);
  if (!OID.test(oid)) throw invalid(`protocol error: expected an object id, got '${line}'`);
  return oid;
}

function depthArg(line: string, value: string): number {
  const depth = /^\d{1,10}$/.test(value) ? Number(value) : NaN;
  if (!(depth >= 1 && depth <= INFINITE_DEPTH)) throw invalid(`protocol error: invalid depth in '${line}'`);
  return depth;
}

function sinceArg(line: string, value: string): number {
  if (!/^\d{1,15}$/.test(value)) throw invalid(`protocol error: invalid deepen-since in '${line}'`);
  return Number(value);
}

/** Lines shared by both protocols' fetch requests (v0 sends them beside its wants). */
function fetchArg(request: FetchRequest, line: string): boolean {
  if (line.startsWith('want ')) request.wants.push(oidArg(line, 'want '));
  else if (line.startsWith('shallow ')) request.shallows.push(oidArg(line, 'shallow '));
  else if (line.startsWith('deepen ')) request.depth = depthArg(line, line.slice(7));
  else if (line.startsWith('deepen-since ')) request.deepenSince = sinceArg(line, line.slice(13));
  else if (line.startsWith('deepen-not ')) {
    const ref = line.slice(11);
    if (!ref) throw invalid(`protocol error: empty deepen-not`);
    request.deepenNot.push(ref);
  } else if (line.startsWith('filter ')) request.filter = line.slice(7);
  else return false;
  return true;
}

/** A v2 request: one command, its capabilities, a delimiter, its arguments, a flush. */
export function parseV2Command(packets: Packet[]): V2Command | null {
  if (packets.length === 0) return null;
  let i = 0;
  let command: string | null = null;
  for (; i < packets.length; i++) {
    const p = packets[i]!;
    if (p.kind !== 'data') break;
    const line = p.text;
    if (line.startsWith('command=')) {
      if (command !== null) throw invalid('protocol error: more than one command');
      command = line.slice(8);
    } else if (line === 'object-format=sha1' || line.startsWith('agent=') || line.startsWith('server-option=') || line.startsWith('session-id=')) {
      continue;
    } else if (line.startsWith('object-format=')) {
      throw invalid(`unsupported object format '${line.slice(14)}'`);
    } else throw invalid(`unknown capability '${line}'`);
  }
  if (command === null) throw invalid('protocol error: no command requested');
  const args: string[] = [];
  if (packets[i]?.kind === 'delim') {
    for (i++; i < packets.length && packets[i]!.kind === 'data'; i++) args.push((packets[i] as { text: string }).text);
  }
  if (packets[i]?.kind !== 'flush') throw invalid(`protocol error: the ${command} request does not end with a flush`);
  if (i + 1 !== packets.length) throw invalid('protocol error: data after the end of the command');
  if (command === 'ls-refs') return { command, args: parseLsRefs(args) };
  if (command === 'fetch') return { command, args: parseV2Fetch(args) };
  throw invalid(`invalid command '${command}'`);
}

function parseLsRefs(args: string[]): LsRefsRequest {
  const request: LsRefsRequest = { symrefs: false, peel: false, unborn: false, prefixes: [] };
  for (const line of args) {
    if (line === 'symrefs') request.symrefs = true;
    else if (line === 'peel') request.peel = true;
    else if (line === 'unborn') request.unborn = true;
    else if (line.startsWith('ref-prefix ')) request.prefixes.push(line.slice(11));
    else throw invalid(`unexpected line: '${line}'`);
  }
  return request;
}

function parseV2Fetch(args: string[]): FetchRequest {
  const request = emptyFetch();
  // v2 always multiplexes the packfile on side-band-64k.
  request.sideBand = 'side-band-64k';
  for (const line of args) {
    if (fetchArg(request, line)) continue;
    if (line.startsWith('have ')) request.haves.push(oidArg(line, 'have '));
    else if (line === 'done') request.done = true;
    else if (line === 'thin-pack' || line === 'ofs-delta') continue;
    else if (line === 'no-progress') request.noProgress = true;
    else if (line === 'include-tag') request.includeTag = true;
    else if (line === 'deepen-relative') request.deepenRelative = true;
    else throw invalid(`unexpected line: '${line}'`);
  }
  return request;
}

/**
 * A v0 stateless-RPC request: wants (capabilities after the first oid), shallow and deepen lines,
 * a flush; then haves, ending with `done` or, for a negotiation round, a flush. Only the first
 * round counts, as in git's own stateless upload-pack. A shallow clone's first request stops
 * after the wants (it only asks for the shallow list): then `roundEnded` is false. Null when
 * there are no wants (nothing to do).
 */
export function parseV0Fetch(packets: Packet[]): { request: FetchRequest; roundEnded: boolean } | null {
  const request = emptyFetch();
  let i = 0;
  for (; i < packets.length; i++) {
    const p = packets[i]!;
    if (p.kind !== 'data') break;
    let line = p.text;
    if (i === 0 && line.startsWith('want ')) {
      const space = line.indexOf(' ', 5);
      if (space > 0) {
        capabilities(request, line.slice(space + 1).split(' '));
        line = line.slice(0, space);
      }
    }
    if (!fetchArg(request, line)) throw invalid(`protocol error: expected a want or shallow line, got '${line}'`);
  }
  if (packets[i]?.kind !== 'flush' && i < packets.length) throw invalid('protocol error: unexpected special packet in the wants');
  if (request.wants.length === 0) return null;
  for (i++; i < packets.length; i++) {
    const p = packets[i]!;
    if (p.kind === 'flush') return { request, roundEnded: true };
    if (p.kind !== 'data') throw invalid('protocol error: unexpected special packet in the haves');
    if (p.text.startsWith('have ')) request.haves.push(oidArg(p.text, 'have '));
    else if (p.text === 'done') {
      request.done = true;
      return { request, roundEnded: true };
    } else throw invalid(`protocol error: expected a have line, got '${p.text}'`);
  }
  return { request, roundEnded: false };
}

function capabilities(request: FetchRequest, names: string[]): void {
  for (const name of names) {
    if (name === 'multi_ack_detailed') request.multiAckDetailed = true;
    else if (name === 'no-done') request.noDone = true;
    else if (name === 'side-band-64k') request.sideBand = 'side-band-64k';
    else if (name === 'side-band' && request.sideBand === 'none') request.sideBand = 'side-band';
    else if (name === 'no-progress') request.noProgress = true;
    else if (name === 'include-tag') request.includeTag = true;
    else if (name === 'deepen-relative') request.deepenRelative = true;
    else if (name.startsWith('object-format=') && name !== 'object-format=sha1') throw invalid(`unsupported object format '${name.slice(14)}'`);
    // Others (thin-pack, ofs-delta, agent=…, multi_ack) need nothing from us.
  }
}
