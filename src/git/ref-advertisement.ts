/**
 * How upload-pack shows a repository's refs (API §14): the v0 advertisement that answers
 * `GET …/info/refs` (with the server's capabilities on its first line), the v2 capability
 * advertisement, and v2's `ls-refs`. HEAD is a symref to the default bookmark's branch, unborn
 * while that bookmark sits at the virtual root.
 */
import type { RepoRefs } from '../storage/git-refs.js';
import type { LsRefsRequest } from './fetch-request.js';
import type { PktWriter } from './response-writer.js';

export const AGENT = 'repohost/1';

const V0_CAPABILITIES = [
  'multi_ack_detailed',
  'no-done',
  'side-band-64k',
  'side-band',
  'thin-pack',
  'ofs-delta',
  'shallow',
  'deepen-since',
  'deepen-not',
  'deepen-relative',
  'no-progress',
  'include-tag',
  // Any object of the repository may be wanted (API §14): partial clones fetch what they lack.
  'allow-tip-sha1-in-want',
  'allow-reachable-sha1-in-want',
  'filter',
  'object-format=sha1',
  `agent=${AGENT}`,
];

export function writeV2Capabilities(out: PktWriter): void {
  for (const line of ['version 2', `agent=${AGENT}`, 'ls-refs=unborn', 'fetch=shallow filter', 'server-option', 'object-format=sha1']) out.line(line);
  out.flushPkt();
}

export function writeV0Advertisement(out: PktWriter, { refs, head }: RepoRefs): void {
  const lines: string[] = [];
  if (head.oid) lines.push(`${head.oid} HEAD`);
  for (const ref of refs) {
    lines.push(`${ref.oid} ${ref.name}`);
    if (ref.peeled) lines.push(`${ref.peeled} ${ref.name}^{}`);
  }
  const capabilities = [...V0_CAPABILITIES, ...(head.oid ? [`symref=HEAD:${head.target}`] : [])].join(' ');
  if (lines.length === 0) lines.push(`${'0'.repeat(40)} capabilities^{}`);
  lines[0] = `${lines[0]}\0${capabilities}`;
  for (const line of lines) out.line(line);
  out.flushPkt();
}

export function writeLsRefs(out: PktWriter, { refs, head }: RepoRefs, request: LsRefsRequest): void {
  const wanted = (name: string): boolean => request.prefixes.length === 0 || request.prefixes.some((p) => name.startsWith(p));
  if (wanted('HEAD') && (head.oid || (request.unborn && request.symrefs))) {
    out.line(`${head.oid ?? 'unborn'} HEAD${request.symrefs ? ` symref-target:${head.target}` : ''}`);
  }
  for (const ref of refs) {
    if (!wanted(ref.name)) continue;
    out.line(`${ref.oid} ${ref.name}${request.peel && ref.peeled ? ` peeled:${ref.peeled}` : ''}`);
  }
  out.flushPkt();
}

/** A ref named the way a user may write it (`main`, `v1`, `heads/main`, `refs/heads/main`), as git resolves it. */
export function resolveRefName({ refs, head }: RepoRefs, name: string): string | undefined {
  if (name === 'HEAD') return head.oid ?? undefined;
  for (const candidate of [name, `refs/${name}`, `refs/tags/${name}`, `refs/heads/${name}`]) {
    const ref = refs.find((r) => r.name === candidate);
    if (ref) return ref.oid;
  }
  return undefined;
}

/** Annotated tags (tag objects) among the refs: what `include-tag` may add to a pack. */
export function annotatedTags({ refs }: RepoRefs): string[] {
  return refs.filter((r) => r.name.startsWith('refs/tags/') && r.peeled !== null).map((r) => r.oid);
}
