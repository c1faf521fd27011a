/**
 * What the commands of one mailbox drain share: they apply in one write transaction, at one
 * `now`. The mailbox creates one per drain, so nothing outlives the batch it belongs to.
 */
export class Batch {
  /** Changes rebased by a command of this batch (`repo\0change` → that command's arrival seq). */
  private rebased: Map<string, number> | null = null;

  constructor(readonly now: Date) {}

  /** Records that a succeeded command (arrival `seq`) rebased the change. */
  noteRebased(repoId: string, changeId: string, seq: number): void {
    (this.rebased ??= new Map()).set(`${repoId}\0${changeId}`, seq);
  }

  /** The arrival seq of the command of this batch that rebased the change, if one did. */
  rebasedBy(repoId: string, changeId: string): number | undefined {
    return this.rebased?.get(`${repoId}\0${changeId}`);
  }
}
