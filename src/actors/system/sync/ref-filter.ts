/**
 * A sync's `ref_globs` (API §9): one glob for branches and one for tags, matched against names
 * without `refs/heads/` / `refs/tags/`. An omitted filter means all, shown as `"*"`; that `"*"`
 * matches every name, nested ones included, while any other glob follows the usual rules (`*`
 * not crossing `/`, `**`, `?`).
 */
import { compileRefGlob, type RefGlob } from '../../../protocol/ref-glob.js';

export interface RefGlobs {
  branches: string;
  tags: string;
}

export interface RefGlobsInput {
  branches?: string | null;
  tags?: string | null;
}

export const ALL = '*';
export const BRANCH_PREFIX = 'refs/heads/';
export const TAG_PREFIX = 'refs/tags/';
export const NOTES_REF = 'refs/notes/agentblame';

/** Normalizes and checks (400 on a bad glob) what a client sent. */
export function normalizeRefGlobs(input: RefGlobsInput | null | undefined): RefGlobs {
  const globs = { branches: input?.branches ?? ALL, tags: input?.tags ?? ALL };
  compileRefGlob(globs.branches);
  compileRefGlob(globs.tags);
  return globs;
}

export type RefKind = 'branch' | 'tag' | 'notes';

export interface RefFilter {
  /** Whether a full ref name is selected; null for refs a sync never considers. */
  classify(ref: string): { kind: RefKind; name: string; selected: boolean } | null;
}

function matcher(glob: string): RefGlob['test'] {
  if (glob === ALL) return () => true;
  return compileRefGlob(glob).test;
}

export function refFilter(globs: RefGlobs): RefFilter {
  const branch = matcher(globs.branches);
  const tag = matcher(globs.tags);
  return {
    classify(ref) {
      if (ref === NOTES_REF) return { kind: 'notes', name: ref, selected: true };
      if (ref.startsWith(BRANCH_PREFIX) && ref.length > BRANCH_PREFIX.length) {
        const name = ref.slice(BRANCH_PREFIX.length);
        return { kind: 'branch', name, selected: branch(name) };
      }
      if (ref.startsWith(TAG_PREFIX) && ref.length > TAG_PREFIX.length && !ref.endsWith('^{}')) {
        const name = ref.slice(TAG_PREFIX.length);
        return { kind: 'tag', name, selected: tag(name) };
      }
      return null;
    },
  };
}
