import { execFileSync } from 'node:child_process';
import { rmSync, statfsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Brings the disk holding a directory below the server's free-space floor for a while, for
 * real: the floor (`REPOHOST_MIN_FREE_BYTES`) is set below the free space of the moment, and a
 * file takes the space in between and some more. The file's blocks are reserved with `fallocate`, not
 * written: a writer of hundreds of MiB would hold the server's flushes behind its own for tens of
 * seconds, which is a different fault. Removing the file gives the space back. Other programs
 * share the disk, so the free space is measured, never assumed.
 */
export class DiskFiller {
  private readonly path: string;
  /** Bytes the file holds now. */
  size = 0;

  constructor(private readonly dir: string) {
    this.path = join(dir, 'soak-disk-fill');
  }

  free(): number {
    const fs = statfsSync(this.dir);
    return fs.bavail * fs.bsize;
  }

  /** A floor `margin` bytes under the free space now: crossed once the filler takes more than that. */
  floorBelowFree(margin: number): number {
    return Math.max(0, this.free() - margin);
  }

  /** Grows the file until the free space is `below` bytes under `floor` (or the file holds `cap` bytes). */
  fillUnder(floor: number, below: number, cap: number): void {
    for (let tries = 0; tries < 5; tries++) {
      const need = this.free() - (floor - below);
      if (need <= 0 || this.size >= cap) return;
      this.size = Math.min(cap, this.size + need);
      execFileSync('fallocate', ['--length', String(this.size), this.path]);
    }
  }

  remove(): void {
    rmSync(this.path, { force: true });
    this.size = 0;
  }
}
