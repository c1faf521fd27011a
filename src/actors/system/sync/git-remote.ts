/**
 * One upstream as the git smart-HTTP transport sees it (gitprotocol-http, protocol v0/v1): ref
 * discovery (`GET info/refs?service=…`) and the stateless-RPC POST of a service. Credentials
 * travel only as the Basic `Authorization` header, never in the URL, so no error message or log
 * line built from a URL can carry them. Nothing the upstream sends is quoted in an error.
 */
import type { GitHttpClient, GitHttpResponse } from './git-http.js';
import { PktReader, pktText } from './pkt-line.js';
import { GitProtocolError, UpstreamStatusError } from './sync-errors.js';
import { DISCOVERY_MAX_BYTES } from './upstream-limits.js';

export type GitService = 'git-upload-pack' | 'git-receive-pack';

/** The credential as it is sealed in `repo.upstream.sealed_auth` (the create/patch input). */
export type UpstreamAuth =
  | { kind: 'token'; token: string; token_username?: string }
  | { kind: 'username_password'; username: string; password: string };

export interface Remote {
  url: string;
  http: GitHttpClient;
  headers: Record<string, string>;
  /** Every string that must never appear in a message (passwords, tokens, the Basic value). */
  secrets: string[];
}

export interface Advertisement {
  /** Full ref name → oid of HEAD, branches, tags and notes; annotated tags also appear peeled as `<ref>^{}`. */
  refs: Map<string, string>;
  symrefs: Map<string, string>;
  capabilities: Set<string>;
}

export function remoteFor(url: string, auth: UpstreamAuth | null, http: GitHttpClient): Remote {
  const headers: Record<string, string> = {};
  const secrets: string[] = [];
  if (auth) {
    const user = auth.kind === 'token' ? (auth.token_username ?? 'x-access-token') : auth.username;
    const password = auth.kind === 'token' ? auth.token : auth.password;
    const basic = Buffer.from(`${user}:${password}`).toString('base64');
    headers.authorization = `Basic ${basic}`;
    secrets.push(password, basic);
  }
  // The URL is used without a trailing slash: services live at `<url>/info/refs`, `<url>/git-…`.
  return { url: url.replace(/\/+$/, ''), http, headers, secrets };
}

const OID = /^[0-9a-f]{40}$/;
const ZERO_OID = '0'.repeat(40);
/** The refs a sync considers; the rest (pull-request refs, say) are skipped while reading. */
const KEPT_REF = /^(HEAD$|refs\/(heads|tags|notes)\/)/;
/** A ref name: printable, no spaces (git refuses control characters and spaces in ref names). */
const REF_NAME = /^[\x21-\x7e\u0080-\uffff]+$/;

const malformed = (): GitProtocolError => new GitProtocolError('the upstream sent a malformed ref advertisement');

/** `<oid> <name>` (the first line also carries `\0<capabilities>`). */
function refLine(text: string): [string, string] {
  const space = text.indexOf(' ');
  const oid = text.slice(0, space);
  const name = text.slice(space + 1);
  if (space !== 40 || !OID.test(oid) || !REF_NAME.test(name)) throw malformed();
  return [oid, name];
}

async function parseAdvertisement(reader: PktReader, service: GitService): Promise<Advertisement> {
  const adv: Advertisement = { refs: new Map(), symrefs: new Map(), capabilities: new Set() };
  let line = await reader.read();
  if (!line) throw malformed();
  const first = pktText(line);
  if (first === 'version 2') throw new GitProtocolError('the upstream answered with git protocol v2 only, which is not supported');
  if (first !== `# service=${service}`) throw malformed();
  do line = await reader.read();
  while (line === null);
  if (line === undefined) return adv;
  const text = pktText(line);
  if (text === 'version 2') throw new GitProtocolError('the upstream answered with git protocol v2 only, which is not supported');
  const nul = text.indexOf('\0');
  if (nul < 0) throw malformed();
  for (const cap of text.slice(nul + 1).split(' ')) {
    if (!cap) continue;
    adv.capabilities.add(cap);
    const symref = /^symref=([^:]+):(.+)$/.exec(cap);
    if (symref) adv.symrefs.set(symref[1]!, symref[2]!);
  }
  const [oid, name] = refLine(text.slice(0, nul));
  // A repository without refs advertises only its capabilities, on a placeholder line.
  if (!(oid === ZERO_OID && name === 'capabilities^{}') && KEPT_REF.test(name)) adv.refs.set(name, oid);
  for (line = await reader.read(); line; line = await reader.read()) {
    const next = pktText(line);
    if (next.startsWith('shallow ')) continue;
    const [refOid, refName] = refLine(next);
    if (KEPT_REF.test(refName)) adv.refs.set(refName, refOid);
  }
  return adv;
}

export async function discover(remote: Remote, service: GitService): Promise<Advertisement> {
  const res = await remote.http.request({
    url: `${remote.url}/info/refs?service=${service}`,
    method: 'GET',
    headers: { ...remote.headers, accept: '*/*', pragma: 'no-cache' },
    maxBytes: DISCOVERY_MAX_BYTES,
    what: 'ref advertisement',
  });
  try {
    if (res.status !== 200) throw new UpstreamStatusError(res.status);
    // A dumb-HTTP server or a web page answers with some other type.
    if (res.contentType !== `application/x-${service}-advertisement`) {
      throw new GitProtocolError('the upstream did not answer as a git smart-HTTP server (no ref advertisement)');
    }
    return await parseAdvertisement(new PktReader(res.body), service);
  } finally {
    res.close();
  }
}

/**
 * POSTs a service request and hands the body of its 200 answer, at most `maxBytes` long, to
 * `read`; the response is closed once `read` settles.
 */
export async function request<T>(remote: Remote, service: GitService, body: Buffer, limit: { maxBytes: number; what: string }, read: (answer: AsyncIterable<Uint8Array>) => Promise<T>): Promise<T> {
  const res: GitHttpResponse = await remote.http.request({
    url: `${remote.url}/${service}`,
    method: 'POST',
    headers: { ...remote.headers, 'content-type': `application/x-${service}-request`, accept: `application/x-${service}-result` },
    body,
    ...limit,
  });
  try {
    if (res.status !== 200) throw new UpstreamStatusError(res.status);
    return await read(res.body);
  } finally {
    res.close();
  }
}

/** The capabilities we ask for: those we want that the remote offers (plus our agent). */
export function pickCapabilities(offered: Set<string>, wanted: readonly string[]): string[] {
  return [...wanted.filter((c) => offered.has(c)), 'agent=repohost/1'];
}
