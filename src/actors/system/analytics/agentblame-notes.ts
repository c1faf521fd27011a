/**
 * agentblame's line attribution, as its git notes carry it (`refs/notes/agentblame`): a notes
 * commit whose tree maps each annotated commit (path = the commit's hex oid, possibly split into
 * 2-character fan-out directories, as git writes it for large note sets) to a blob holding the
 * JSON note. Formats read:
 *
 *   v1: {"version":1, "attributions":[{"path","start_line","end_line","provider","model",…}]}
 *   v2: {"version":2, "attributions":[{"path","startLine","endLine","provider","model",…}]}
 *   v3: {"version":3, "sessions":{<id>:{"agent","model"}}, "files":{<path>:[{"session","lines":"3-9,12"}]}}
 *
 * Lines are 1-based and inclusive, numbered in the file as of the annotated commit.
 */
import type { ObjectStore } from '../../../vcs/object-store.js';
import { TREE_MODE, parseCommit, readBlob, readTree } from '../../../vcs/git-object.js';
import { normalizeProvider, providerOfModel } from './agent-table.js';

export interface NoteRange {
  path: string;
  start: number;
  end: number;
  provider: string;
  model: string | null;
}

const HEX = /^[0-9a-f]+$/;

/** commit oid → note blob oid, for every note under the notes commit (or a bare notes tree). */
export function readNotesIndex(store: ObjectStore, notesOid: string): Map<string, string> {
  const index = new Map<string, string>();
  const object = store.read(notesOid);
  if (!object) throw new Error(`agentblame notes object ${notesOid} is missing`);
  const root = object.type === 'commit' ? parseCommit(object.content).tree : notesOid;
  const walk = (treeOid: string, prefix: string): void => {
    for (const entry of readTree(store, treeOid)) {
      const name = entry.name.toLowerCase();
      if (!HEX.test(name)) continue;
      const path = prefix + name;
      if (entry.mode === TREE_MODE) {
        if (path.length < 40) walk(entry.oid, path);
      } else if (path.length === 40) index.set(path, entry.oid);
    }
  };
  walk(root, '');
  return index;
}

const isLine = (n: unknown): n is number => typeof n === 'number' && Number.isInteger(n) && n >= 1;
const text = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);

function providerKey(provider: string | null, model: string | null): string {
  if (provider) return normalizeProvider(provider);
  return model ? providerOfModel(model) : 'unknown';
}

function range(path: unknown, start: unknown, end: unknown, provider: unknown, model: unknown): NoteRange | null {
  if (typeof path !== 'string' || path === '' || !isLine(start) || !isLine(end) || end < start) return null;
  const m = text(model);
  return { path: path.replace(/^\/+/, ''), start, end, provider: providerKey(text(provider), m), model: m };
}

/** "3-9,12" → [[3, 9], [12, 12]] */
function parseLineList(list: string): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (const part of list.split(',')) {
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(part);
    if (m) out.push([Number(m[1]), Number(m[2] ?? m[1])]);
  }
  return out;
}

/** The AI ranges of one note; an unreadable note attributes nothing (it is somebody else's data). */
export function parseAgentblameNote(content: string): NoteRange[] {
  let doc: unknown;
  try {
    doc = JSON.parse(content);
  } catch {
    return [];
  }
  if (doc === null || typeof doc !== 'object') return [];
  const note = doc as Record<string, unknown>;
  const out: NoteRange[] = [];
  if (Array.isArray(note.attributions)) {
    for (const item of note.attributions as unknown[]) {
      if (item === null || typeof item !== 'object') continue;
      const a = item as Record<string, unknown>;
      if (a.category !== undefined && a.category !== 'ai_generated') continue;
      const r = range(a.path, a.startLine ?? a.start_line, a.endLine ?? a.end_line, a.provider, a.model);
      if (r) out.push(r);
    }
  }
  if (note.files !== null && typeof note.files === 'object' && !Array.isArray(note.files)) {
    const sessions = (note.sessions !== null && typeof note.sessions === 'object' ? note.sessions : {}) as Record<string, Record<string, unknown> | undefined>;
    for (const [path, entries] of Object.entries(note.files as Record<string, unknown>)) {
      if (!Array.isArray(entries)) continue;
      for (const item of entries as unknown[]) {
        if (item === null || typeof item !== 'object') continue;
        const e = item as Record<string, unknown>;
        const session = typeof e.session === 'string' ? sessions[e.session] : undefined;
        if (typeof e.lines !== 'string') continue;
        for (const [start, end] of parseLineList(e.lines)) {
          const r = range(path, start, end, session?.agent, session?.model);
          if (r) out.push(r);
        }
      }
    }
  }
  return out;
}

/** Rewrites followed back to a noted commit, at most (a chain longer than this is not followed). */
const MAX_REWRITES_FOLLOWED = 1000;

/**
 * The notes of one computation: the index, read once, and each note parsed once. A note follows
 * its commit when the server rewrites it (API §10): a commit without a note of its own takes the
 * note of the commit it replaced (evolve or rebase), nearest first.
 */
export class AgentblameNotes {
  readonly #parsed = new Map<string, NoteRange[]>();
  readonly #followed = new Map<string, string | null>();

  private constructor(
    private readonly store: ObjectStore,
    private readonly index: ReadonlyMap<string, string>,
    private readonly predecessorOf: (commitOid: string) => string | null,
  ) {}

  static read(store: ObjectStore, notesOid: string | null, predecessorOf: (commitOid: string) => string | null = () => null): AgentblameNotes {
    return new AgentblameNotes(store, notesOid ? readNotesIndex(store, notesOid) : new Map(), predecessorOf);
  }

  /** The note blob of a commit, or null: results computed with a note stay valid while it is the same. */
  blobOf(commitOid: string): string | null {
    const own = this.index.get(commitOid);
    if (own !== undefined) return own;
    if (this.index.size === 0) return null;
    let blob = this.#followed.get(commitOid);
    if (blob === undefined) {
      blob = null;
      let oid: string | null = commitOid;
      for (let i = 0; i < MAX_REWRITES_FOLLOWED && oid !== null && blob === null; i++) {
        oid = this.predecessorOf(oid);
        if (oid !== null) blob = this.index.get(oid) ?? null;
      }
      this.#followed.set(commitOid, blob);
    }
    return blob;
  }

  rangesOf(commitOid: string): NoteRange[] {
    const blob = this.blobOf(commitOid);
    if (blob === null) return [];
    let ranges = this.#parsed.get(blob);
    if (!ranges) {
      ranges = parseAgentblameNote(Buffer.from(readBlob(this.store, blob)).toString('utf8'));
      this.#parsed.set(blob, ranges);
    }
    return ranges;
  }
}
