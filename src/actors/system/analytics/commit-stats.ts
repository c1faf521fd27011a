/**
 * One commit's contribution to analytics (API §10): its non-blank added and removed lines against
 * its first parent in the materialized view, and which added lines are AI-written. Per line, in
 * order: a range of the commit's agentblame note covers it (that range's provider and model); else
 * the commit's `AI-Provider:`/`AI-Model:` trailers; else the first of its authors the agent table
 * recognizes; else the line is human. Merge commits count nothing.
 *
 * A pure function of the commit, its first parent, its note and the agent table — which is what
 * lets results be kept per commit oid and reused across rebuilds. Materializing a conflicted commit
 * writes the view's marker blobs and trees: give a store whose writes are scratch (the
 * `LmdbObjectStore` scratch mode), never the repository's own.
 */
import type { ObjectStore } from '../../../vcs/object-store.js';
import { parseCommit, readBlob } from '../../../vcs/git-object.js';
import type { TreeValue } from '../../../vcs/git-object.js';
import { changeCommitView } from '../../../vcs/commit.js';
import type { ChangeCommitView } from '../../../vcs/commit.js';
import { treeSetOfCommit } from '../../../vcs/conflict-layout.js';
import { materializeTreeSet } from '../../../vcs/conflict.js';
import { diffTrees } from '../../../vcs/tree-diff.js';
import { writeEmptyTree } from '../../../vcs/tree-edit.js';
import { isBinaryContent } from '../../../vcs/text-merge.js';
import { normalizeProvider, providerOfModel } from './agent-table.js';
import type { AgentMatch, AgentTable } from './agent-table.js';
import type { NoteRange } from './agentblame-notes.js';
import { diffLineCounts } from './line-diff.js';
import { addCount, type HistoryItem } from './document.js';

/** Files larger than this on either side are not counted (generated or vendored data). */
export const MAX_COUNTED_FILE_BYTES = 8 * 1024 * 1024;
/** `message` in history keeps at most this many characters of the description. */
export const MAX_MESSAGE_CHARS = 4096;

export interface CommitResult {
  oid: string;
  parents: string[];
  merge: boolean;
  /** The history item; counts are zero for a merge. */
  item: HistoryItem;
}

const COUNTED_MODES = new Set(['100644', '100755', '120000']);

function readCounted(store: ObjectStore, value: TreeValue | null): Uint8Array | null {
  if (value === null) return new Uint8Array(0);
  if (!COUNTED_MODES.has(value.mode)) return null;
  const size = store.size(value.oid);
  if (size === undefined) throw new Error(`blob ${value.oid} is missing`);
  if (size > MAX_COUNTED_FILE_BYTES) return null;
  const content = readBlob(store, value.oid);
  return isBinaryContent(content) ? null : content;
}

/** The commit-wide attribution: trailers first, then the first recognized author. */
export function commitAttribution(view: ChangeCommitView, table: AgentTable): AgentMatch | null {
  if (view.aiProvider || view.aiModel) {
    return {
      provider: view.aiProvider ? normalizeProvider(view.aiProvider) : providerOfModel(view.aiModel!),
      model: view.aiModel || null,
    };
  }
  for (const author of view.authors) {
    const match = table.match(author);
    if (match) return match;
  }
  return null;
}



export function computeCommit(store: ObjectStore, oid: string, table: AgentTable, notes: readonly NoteRange[]): CommitResult {
  const object = store.read(oid);
  if (!object || object.type !== 'commit') throw new Error(`commit ${oid} is missing`);
  const commit = parseCommit(object.content);
  const view = changeCommitView(oid, commit);
  const author = view.authors[0]!;
  const item: HistoryItem = {
    date: view.authoredAt,
    sha: oid,
    author: author.email ?? author.name,
    message: view.message.length > MAX_MESSAGE_CHARS ? view.message.slice(0, MAX_MESSAGE_CHARS) : view.message,
    added: 0,
    removed: 0,
    aiLines: 0,
    providers: {},
    models: {},
  };
  const result: CommitResult = { oid, parents: commit.parents, merge: commit.parents.length > 1, item };
  if (result.merge) return result;

  const after = materializeTreeSet(store, view.trees);
  let before: string;
  if (commit.parents.length === 0) before = writeEmptyTree(store);
  else {
    const parent = store.read(commit.parents[0]!);
    if (!parent || parent.type !== 'commit') throw new Error(`commit ${commit.parents[0]} is missing`);
    before = materializeTreeSet(store, treeSetOfCommit(parseCommit(parent.content)));
  }
  const fallback = commitAttribution(view, table);
  const notesByPath = new Map<string, NoteRange[]>();
  for (const range of notes) {
    const list = notesByPath.get(range.path);
    if (list) list.push(range);
    else notesByPath.set(range.path, [range]);
  }

  for (const change of diffTrees(store, before, after)) {
    const oldContent = readCounted(store, change.before);
    const newContent = readCounted(store, change.after);
    if (oldContent === null || newContent === null) continue;
    const lines = diffLineCounts(oldContent, newContent);
    item.removed += lines.removed;
    item.added += lines.added.length;
    const ranges = notesByPath.get(change.path) ?? [];
    for (const line of lines.added) {
      const attribution = ranges.find((r) => r.start <= line && line <= r.end) ?? fallback;
      if (!attribution) continue;
      item.aiLines++;
      addCount(item.providers, attribution.provider, 1);
      if (attribution.model) addCount(item.models, attribution.model, 1);
    }
  }
  return result;
}
