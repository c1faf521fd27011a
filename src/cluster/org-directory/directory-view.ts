import type { OrgRecord, SigningKeyRecord } from '../../storage/records.js';
import type { WebhookTargetRecord } from '../../storage/webhook-store.js';

/** A record as the view holds it, with the revision etcd last changed it at (for a compare-and-swap). */
export interface Held<T> {
  record: T;
  mod: string;
}

/**
 * The in-memory copy of the directory's etcd keys (layout in `GlobalKeys`), indexed for the
 * directory's reads. It is filled from etcd key-values by path; callers copy what they hand out.
 */
export class DirectoryView {
  readonly orgs = new Map<string, OrgRecord>();
  readonly slugs = new Map<string, string>();
  readonly keys = new Map<string, Held<SigningKeyRecord>>();
  readonly keysByOrg = new Map<string, Set<string>>();
  readonly targets = new Map<string, Map<string, Held<WebhookTargetRecord>>>();

  /** `path` is the key below the directory's prefix: `org/<id>`, `org-slug/<slug>`, `key/<id>`, `wht/<org>/<id>`. */
  put(path: string, value: string, mod: string): void {
    const [kind, a, b] = path.split('/') as [string, string, string | undefined];
    if (kind === 'org') this.orgs.set(a, JSON.parse(value) as OrgRecord);
    else if (kind === 'org-slug') this.slugs.set(a, value);
    else if (kind === 'key') {
      const record = JSON.parse(value) as SigningKeyRecord;
      this.keys.set(a, { record, mod });
      let ids = this.keysByOrg.get(record.org_id);
      if (!ids) this.keysByOrg.set(record.org_id, (ids = new Set()));
      ids.add(record.id);
    } else if (kind === 'wht' && b !== undefined) {
      let targets = this.targets.get(a);
      if (!targets) this.targets.set(a, (targets = new Map<string, Held<WebhookTargetRecord>>()));
      targets.set(b, { record: JSON.parse(value) as WebhookTargetRecord, mod });
    }
  }

  remove(path: string): void {
    const [kind, a, b] = path.split('/') as [string, string, string | undefined];
    if (kind === 'org') this.orgs.delete(a);
    else if (kind === 'org-slug') this.slugs.delete(a);
    else if (kind === 'key') {
      const held = this.keys.get(a);
      this.keys.delete(a);
      if (held) this.keysByOrg.get(held.record.org_id)?.delete(a);
    } else if (kind === 'wht' && b !== undefined) {
      const targets = this.targets.get(a);
      targets?.delete(b);
      if (targets?.size === 0) this.targets.delete(a);
    }
  }
}
