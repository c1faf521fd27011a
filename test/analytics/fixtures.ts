/**
 * Fixtures for the analytics unit tests: a repository history built with the change model over
 * a MemoryObjectStore, a source that serves it, and a temporary LMDB environment.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { K } from '../../src/storage/keys.js';
import type { RepoRecord } from '../../src/storage/records.js';
import { writeBlob, writeTree } from '../../src/vcs/git-object.js';
import type { TreeEntry } from '../../src/vcs/git-object.js';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { writeChangeCommit } from '../../src/vcs/commit.js';
import type { Attribution, Person } from '../../src/vcs/commit.js';
import { newChangeId } from '../../src/vcs/ids.js';
import type { AnalyticsSource } from '../../src/actors/system/analytics/source.js';
import { makeTree } from '../vcs/vcs-helpers.js';
import type { FileSpec } from '../vcs/vcs-helpers.js';

export const HUMAN: Person = { name: 'Hana Human', email: 'hana@example.com' };
export const CLAUDE: Person = { name: 'Claude', email: 'noreply@anthropic.com' };
export const T0 = new Date('2026-03-01T10:00:00.000Z');
export const HOUR = 3_600_000;

export interface CommitSpec {
  files: Record<string, FileSpec>;
  parents?: string[];
  authors?: Person[];
  attribution?: Attribution;
  message?: string;
  date?: Date;
  /** A conflicted commit: the tree set's other terms [base, side1] besides `files` as side 0. */
  conflict?: { base: Record<string, FileSpec>; side: Record<string, FileSpec> };
}

export class TestHistory implements AnalyticsSource {
  readonly store = new MemoryObjectStore();
  headOid: string | null = null;
  notesOid: string | null = null;
  repoExists = true;
  /** Rewritten commit → the commit it replaced. */
  readonly predecessors = new Map<string, string>();

  commit(spec: CommitSpec): string {
    const tree = makeTree(this.store, spec.files);
    const trees = spec.conflict ? [tree, makeTree(this.store, spec.conflict.base), makeTree(this.store, spec.conflict.side)] : tree;
    return writeChangeCommit(this.store, {
      trees,
      parents: spec.parents ?? [],
      changeId: newChangeId(),
      authors: spec.authors ?? [HUMAN],
      authoredAt: spec.date ?? T0,
      committer: HUMAN,
      committedAt: spec.date ?? T0,
      description: spec.message ?? '',
      attribution: spec.attribution ?? null,
    });
  }

  /** Writes a notes commit with `notes` (commit oid → note text) in git's 2-character fan-out layout. */
  writeNotes(notes: Record<string, string>): string {
    const byPrefix = new Map<string, TreeEntry[]>();
    for (const [oid, text] of Object.entries(notes)) {
      const entries = byPrefix.get(oid.slice(0, 2)) ?? [];
      entries.push({ name: oid.slice(2), mode: '100644', oid: writeBlob(this.store, text) });
      byPrefix.set(oid.slice(0, 2), entries);
    }
    const root = writeTree(
      this.store,
      [...byPrefix].map(([name, entries]) => ({ name, mode: '40000' as const, oid: writeTree(this.store, entries) })),
    );
    this.notesOid = writeChangeCommit(this.store, {
      trees: root,
      parents: [],
      changeId: newChangeId(),
      authors: [HUMAN],
      authoredAt: T0,
      committer: HUMAN,
      committedAt: T0,
      description: 'Notes added by agentblame',
    });
    return this.notesOid;
  }

  exists(): boolean {
    return this.repoExists;
  }

  head(): string | null {
    return this.headOid;
  }

  notes(): string | null {
    return this.notesOid;
  }

  objects(): MemoryObjectStore {
    return this.store;
  }

  predecessor(_repoId: string, oid: string): string | null {
    return this.predecessors.get(oid) ?? null;
  }
}

export function lines(...xs: string[]): string {
  return xs.map((x) => `${x}\n`).join('');
}

export function tempStorage(): { storage: Storage; cleanup: () => Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-analytics-'));
  const storage = openStorage(dir);
  return {
    storage,
    async cleanup() {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Puts the records a repository's head is read from (the org's repository list, repository,
 * default bookmark, change) straight into LMDB, as the write path would, so sources and
 * `readAnalytics` see a head.
 */
export function seedRepo(storage: Storage, repoId: string, headOid: string | null): void {
  const orgId = 'org_analytics_test';
  const changeId = headOid ? `chg_${headOid}` : 'z'.repeat(32);
  storage.meta.transactionSync(() => {
    storage.meta.putSync(K.orgRepo(orgId, repoId), { name: repoId.toLowerCase(), created_at: T0.toISOString() });
    const previous = storage.meta.get(K.repo(repoId)) as RepoRecord | undefined;
    const repo: RepoRecord = {
      id: repoId,
      org_id: orgId,
      name: repoId,
      default_bookmark: 'main',
      created_at: T0.toISOString(),
      updated_at: T0.toISOString(),
      tags: {},
      upstream: null,
      last_op_id: `op_${(Number(previous?.last_op_id?.slice(3) ?? 0) + 1)}`,
    };
    storage.meta.putSync(K.repo(repoId), repo);
    storage.meta.putSync(K.bookmark(repoId, 'main'), { name: 'main', change_id: changeId, created_at: T0.toISOString(), updated_at: T0.toISOString() });
    if (headOid) storage.meta.putSync(K.change(repoId, changeId), { id: changeId, commit_oid: headOid, parents: [] });
  });
}
