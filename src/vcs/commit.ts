/**
 * Commits of changes: writing the git commit for a change and reading one back as the API sees
 * it (spec §5.1–5.3). Every commit we write carries `change-id <id>` after `committer` (after
 * `jj:trees` when conflicted, the order jj writes), so jj reads the same change ids.
 */
import type { ObjectStore } from './object-store.js';
import { commitHeader, readCommit, writeCommit } from './git-object.js';
import type { CommitHeader, CommitObject, GitSignature } from './git-object.js';
import { CHANGE_ID_HEADER, treeSetHeaders, treeSetOfCommit, writeTreeSet } from './conflict-layout.js';
import type { TreeSet } from './conflict-layout.js';
import { composeCommitMessage, parseCommitMessage } from './commit-message.js';
import { decodeReverseHex, isChangeId, syntheticChangeId } from './ids.js';
import { VcsError } from './errors.js';

/** An author or committer as the API gives it. `null` and `""` emails both mean "none". */
export interface Person {
  name: string;
  email: string | null;
}

export interface Attribution {
  provider?: string | null;
  model?: string | null;
}

/** Who wrote a change's commit, when, and what it says: the same for every kind of commit. */
export interface CommitAuthorship {
  changeId: string;
  /** The first is the git author, the others become `Co-authored-by:` trailers (1–100). */
  authors: readonly Person[];
  authoredAt: Date;
  committer: Person;
  committedAt: Date;
  /** The description without managed trailers; `""` = none. */
  description: string;
  attribution?: Attribution | null;
}

export interface NewChangeCommit extends CommitAuthorship {
  /** A tree oid, or a tree set (written in jj's conflict layout when it has several trees). */
  trees: TreeSet | string;
  /** Parent commit oids; empty for a change on the virtual root. */
  parents: readonly string[];
  /** Time zone written for both times (minutes east of UTC); default UTC. */
  tzOffsetMinutes?: number;
}

export interface PersonWithDate {
  name: string;
  /** `""` when none. */
  email: string;
  /** ISO-8601 UTC with milliseconds. */
  date: string;
}

/** A commit as the API reads it (the Change shape's commit-derived fields). */
export interface ChangeCommitView {
  oid: string;
  /** From the `change-id` header, else jj's synthetic id of the commit. */
  changeId: string;
  hasChangeIdHeader: boolean;
  /** The description without the managed trailers (`""` = none). */
  message: string;
  authors: Person[];
  author: PersonWithDate;
  committer: PersonWithDate;
  authoredAt: string;
  parents: string[];
  /** The git root tree (jj's layout when conflicted). */
  rootTreeOid: string;
  /** The commit's tree set: one tree, or the `jj:trees` terms. */
  trees: TreeSet;
  isConflicted: boolean;
  /** The `jj:trees` terms when conflicted, else null. */
  conflictTrees: TreeSet | null;
  aiProvider: string | null;
  aiModel: string | null;
}

/** jj writes this for an empty name or email, which git tools refuse; we read it back as "". */
export const EMPTY_STRING_PLACEHOLDER = 'JJ_EMPTY_STRING';

function toSignature(person: Person, date: Date, tzOffsetMinutes: number): GitSignature {
  const name = person.name.replace(/[<>\n\r\0]/g, '').trim();
  return {
    name: name === '' ? EMPTY_STRING_PLACEHOLDER : name,
    email: person.email ?? '',
    timestamp: Math.floor(date.getTime() / 1000),
    tzOffsetMinutes,
  };
}

function fromPlaceholder(value: string): string {
  return value === EMPTY_STRING_PLACEHOLDER ? '' : value;
}

function isoDate(sig: GitSignature): string {
  return new Date(sig.timestamp * 1000).toISOString();
}

function changeIdHeaders(changeId: string): CommitHeader[] {
  if (!isChangeId(changeId)) throw new VcsError('corrupt', `invalid change id ${changeId}`);
  return [{ name: CHANGE_ID_HEADER, value: changeId }];
}

/** Writes the commit for a change and returns its oid. */
export function writeChangeCommit(store: ObjectStore, input: NewChangeCommit): string {
  if (input.authors.length === 0) throw new VcsError('corrupt', 'a commit needs at least one author');
  const trees = typeof input.trees === 'string' ? [input.trees] : input.trees;
  const tz = input.tzOffsetMinutes ?? 0;
  const [first, ...coAuthors] = input.authors;
  const message = composeCommitMessage({
    description: input.description,
    coAuthors: coAuthors.map((a) => ({ name: a.name, email: a.email })),
    aiProvider: input.attribution?.provider ?? null,
    aiModel: input.attribution?.model ?? null,
  });
  return writeCommit(store, {
    tree: writeTreeSet(store, trees),
    parents: [...input.parents],
    author: toSignature(first!, input.authoredAt, tz),
    committer: toSignature(input.committer, input.committedAt, tz),
    extraHeaders: [...treeSetHeaders(trees), ...changeIdHeaders(input.changeId)],
    message,
  });
}

/** The change id a commit belongs to: its valid `change-id` header, else jj's synthetic id. */
export function changeIdOfCommit(oid: string, commit: CommitObject): { changeId: string; fromHeader: boolean } {
  const header = commitHeader(commit, CHANGE_ID_HEADER);
  if (header !== undefined && isChangeId(header) && decodeReverseHex(header).length === 16) {
    return { changeId: header, fromHeader: true };
  }
  return { changeId: syntheticChangeId(oid), fromHeader: false };
}

export function changeCommitView(oid: string, commit: CommitObject): ChangeCommitView {
  const parts = parseCommitMessage(commit.message);
  const trees = treeSetOfCommit(commit);
  const { changeId, fromHeader } = changeIdOfCommit(oid, commit);
  const authorName = fromPlaceholder(commit.author.name);
  const authorEmail = fromPlaceholder(commit.author.email);
  return {
    oid,
    changeId,
    hasChangeIdHeader: fromHeader,
    message: parts.description,
    authors: [{ name: authorName, email: authorEmail === '' ? null : authorEmail }, ...parts.coAuthors],
    author: { name: authorName, email: authorEmail, date: isoDate(commit.author) },
    committer: {
      name: fromPlaceholder(commit.committer.name),
      email: fromPlaceholder(commit.committer.email),
      date: isoDate(commit.committer),
    },
    authoredAt: isoDate(commit.author),
    parents: commit.parents,
    rootTreeOid: commit.tree,
    trees,
    isConflicted: trees.length > 1,
    conflictTrees: trees.length > 1 ? trees : null,
    aiProvider: parts.aiProvider,
    aiModel: parts.aiModel,
  };
}

export function readChangeCommit(store: ObjectStore, oid: string): ChangeCommitView {
  return changeCommitView(oid, readCommit(store, oid));
}

export interface CommitRewrite {
  parents: readonly string[];
  trees: TreeSet;
  committer: Person;
  committedAt: Date;
}

/**
 * Rewrites a commit onto new parents and a new tree set, as jj does on rebase: author, author
 * time and message are kept, the committer becomes the writer, and the commit keeps its change
 * id (a commit that had none gets its synthetic id as a header, so the id stays stable). Other
 * headers (signatures, encodings, old conflict labels) are not carried over: they no longer
 * describe the new commit.
 */
export function rewriteCommit(store: ObjectStore, oldOid: string, rewrite: CommitRewrite): string {
  const old = readCommit(store, oldOid);
  const { changeId } = changeIdOfCommit(oldOid, old);
  return writeCommit(store, {
    tree: writeTreeSet(store, rewrite.trees),
    parents: [...rewrite.parents],
    author: old.author,
    committer: toSignature(rewrite.committer, rewrite.committedAt, 0),
    extraHeaders: [...treeSetHeaders(rewrite.trees), ...changeIdHeaders(changeId)],
    message: old.message,
  });
}
