/**
 * One upstream as the git smart-HTTP transport sees it: ref discovery (`info/refs`) and the
 * stateless-RPC POST of a service, through isomorphic-git's `GitRemoteHTTP` (protocol v0/v1) on
 * our policy-checked HTTP client. Credentials travel only as the Basic `Authorization` header,
 * never in the URL, so no error message or log line built from a URL can carry them.
 */
import { GitRemoteHTTP } from 'isomorphic-git/managers';
import type { GitHttpClient } from './git-http.js';
import { GitProtocolError } from './sync-errors.js';

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
  /** Full ref name → oid; annotated tags also appear peeled as `<ref>^{}`. */
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

export async function discover(remote: Remote, service: GitService): Promise<Advertisement> {
  const result = (await GitRemoteHTTP.discover({
    http: remote.http as Parameters<typeof GitRemoteHTTP.discover>[0]['http'],
    service,
    url: remote.url,
    headers: { ...remote.headers },
    protocolVersion: 1,
  })) as { protocolVersion?: number; refs?: Map<string, string>; symrefs?: Map<string, string>; capabilities?: Set<string> };
  if (result.protocolVersion === 2 || !(result.refs instanceof Map)) {
    throw new GitProtocolError('the upstream answered with git protocol v2 only, which is not supported');
  }
  return { refs: result.refs, symrefs: result.symrefs ?? new Map(), capabilities: result.capabilities ?? new Set() };
}

/** POSTs a service request; resolves with the response body once the status is 200. */
export async function request(remote: Remote, service: GitService, body: Buffer): Promise<AsyncIterable<Uint8Array>> {
  const res = await GitRemoteHTTP.connect({
    http: remote.http as Parameters<typeof GitRemoteHTTP.connect>[0]['http'],
    service,
    url: remote.url,
    headers: { ...remote.headers },
    body: [body],
    auth: {},
  });
  if (!res.body) throw new GitProtocolError(`the upstream sent an empty ${service} response`);
  return res.body;
}

/** The capabilities we ask for: those we want that the remote offers (plus our agent). */
export function pickCapabilities(offered: Set<string>, wanted: readonly string[]): string[] {
  return [...wanted.filter((c) => offered.has(c)), 'agent=repohost/1'];
}
