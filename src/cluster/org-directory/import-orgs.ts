import { invalid } from '../../errors.js';
import type { OrgDirectory } from '../../storage/org-directory.js';

export interface ImportedOrgs {
  orgs: number;
  keys: number;
  targets: number;
  /** Records the cluster already held (an import run again adds only what is missing). */
  present: number;
}

/**
 * Copies a single node's org directory (orgs, signing keys, webhook targets) into the cluster's,
 * once, when the cluster starts from that node's data. Records keep their ids and their sealed
 * secrets, so the cluster's REPOHOST_SECRET_KEY must be the node's key. An org whose slug the
 * cluster gives to another org stops the import before anything is written.
 */
export async function importOrgs(from: OrgDirectory, to: OrgDirectory): Promise<ImportedOrgs> {
  const counts: ImportedOrgs = { orgs: 0, keys: 0, targets: 0, present: 0 };
  const orgs = [...from.orgs()];
  const clashes = orgs.filter((org) => {
    const holder = to.orgBySlug(org.slug);
    return holder !== undefined && holder.id !== org.id;
  });
  if (clashes.length) throw invalid('the cluster already has other organizations with these slugs', { slugs: clashes.map((o) => o.slug) });
  for (const org of orgs) {
    if (to.org(org.id)) counts.present++;
    else {
      to.createOrg(org);
      counts.orgs++;
    }
    for (const key of from.orgKeys(org.id)) {
      if (to.key(key.id)) counts.present++;
      else {
        to.createKey(key);
        counts.keys++;
      }
    }
    for (const target of from.targets(org.id)) {
      if (to.target(org.id, target.id)) counts.present++;
      else {
        to.putTarget(target);
        counts.targets++;
      }
    }
  }
  await to.flush();
  return counts;
}
