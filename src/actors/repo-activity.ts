import { repoIdOfActor } from './actor-names.js';

/** Repositories remembered between two takes; past it the taker is told to look at every one. */
const MAX_TOUCHED = 65_536;

/**
 * Which repositories' actors settled a call since it was last asked. Every change to a
 * repository's records is such a call (its commands are the only writers), so a system actor
 * that follows repositories' changes — analytics — looks at these few instead of reading every
 * repository record on every turn, which cost a core's eighth idle at 10,000 repositories.
 */
export class RepoActivity {
  private touched = new Set<string>();
  private overflowed = false;

  settled(actor: string): void {
    const repoId = repoIdOfActor(actor);
    if (repoId === null || this.overflowed) return;
    this.touched.add(repoId);
    if (this.touched.size > MAX_TOUCHED) {
      this.overflowed = true;
      this.touched = new Set();
    }
  }

  /** The repositories touched since the last take, or 'all' when too many were to be kept. */
  take(): string[] | 'all' {
    if (this.overflowed) {
      this.overflowed = false;
      return 'all';
    }
    if (this.touched.size === 0) return [];
    const ids = [...this.touched];
    this.touched = new Set();
    return ids;
  }
}
