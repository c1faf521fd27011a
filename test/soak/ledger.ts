/**
 * What the soak's clients were told: every write with its fate — acknowledged (a 2xx), refused
 * (any other answer: nothing may have been applied), or unknown (no answer: applied whole or not
 * at all) — and the events each acknowledged write must produce, keyed so that a delivered
 * envelope can be matched to the write it came from (`eventKey`).
 */
export const ROOT = 'z'.repeat(32);

export type Fate = 'acked' | 'refused' | 'unknown';

/** One apply-ops of an agent: it writes `latest.txt` and `w<w>.txt` (with metadata), and maybe a big file. */
export interface AgentWrite {
  agent: number;
  repo: string;
  w: number;
  kind: 'create' | 'evolve';
  fate: Fate;
  /** The change created or evolved (acknowledged writes, and every evolve). */
  changeId: string | null;
  commitOid: string | null;
  /** What a create was based on. */
  base: string | null;
  /** The git blob oid of the big file this write carried, if any. */
  bigOid: string | null;
  /** The refusal's status and error code. */
  refusal: string | null;
  /** Refused because the disk was nearly full. */
  diskRefused: boolean;
}

export interface ExpectedEvent {
  key: string;
  /** The event may come as any of these types (a bookmark set by a write is created or moved). */
  types: string[];
  repoId: string | null;
}

export interface BookmarkTrack {
  repo: string;
  name: string;
  /** Where it may point: its last acknowledged target and any unanswered move after that. */
  possible: Set<string>;
  exists: 'yes' | 'no' | 'maybe';
}

export class Ledger {
  readonly writes: AgentWrite[] = [];
  readonly expected: ExpectedEvent[] = [];
  readonly bookmarks: BookmarkTrack[] = [];
  /** Repositories created during the soak: name → id (acknowledged) or null (unknown). */
  readonly createdRepos = new Map<string, string | null>();
  /** Tag values set on a repository: the last acknowledged one and unanswered ones after it. */
  readonly tagValues = new Map<string, Set<string>>();
  readonly syncs: Array<{ repo: string; id: string }> = [];
  readonly counts = { syncsUnknown: 0, bookmarkMoves: 0, bookmarkCreates: 0, repoCreates: 0, repoUpdates: 0, reads: 0 };

  agentWrites(agent: number): AgentWrite[] {
    return this.writes.filter((w) => w.agent === agent);
  }

  /** The newest acknowledged create of an agent: later creates of the agent descend from it. */
  latestCreate(agent: number): AgentWrite | null {
    for (let i = this.writes.length - 1; i >= 0; i--) {
      const w = this.writes[i]!;
      if (w.agent === agent && w.kind === 'create' && w.fate === 'acked') return w;
    }
    return null;
  }

  ackedWrites(): AgentWrite[] {
    return this.writes.filter((w) => w.fate === 'acked');
  }

  expect(key: string, types: string[], repoId: string | null): void {
    this.expected.push({ key, types, repoId });
  }
}

export const bookmarkKey = (repoId: string, name: string, changeId: string): string => `bookmark ${repoId} ${name} ${changeId}`;
export const syncEndKey = (syncId: string): string => `sync.end ${syncId}`;

/** The key of a delivered event, as `Ledger.expect` names it; null for kinds the soak does not expect. */
export function eventKey(e: { type: string; repository: { id: string } | null; data: any }): string | null {
  const repoId = e.repository?.id ?? '';
  switch (e.type) {
    case 'change.created':
      return `change.created ${e.data.change.id}`;
    case 'change.evolved':
      return `change.evolved ${e.data.change.id} ${e.data.change.current_commit_oid}`;
    case 'bookmark.created':
    case 'bookmark.moved':
      return bookmarkKey(repoId, e.data.bookmark.name, e.data.bookmark.change_id);
    case 'repo.created':
      return `repo.created ${e.data.repo.id}`;
    case 'repo.updated':
      return `repo.updated ${e.data.repo.id} ${e.data.after.tags.seq ?? ''}`;
    case 'sync.queued':
      return `sync.queued ${e.data.sync.id} ${e.data.sync.attempt}`;
    case 'sync.completed':
    case 'sync.failed':
      return syncEndKey(e.data.sync.id);
    default:
      return null;
  }
}
