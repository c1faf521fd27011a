/**
 * Scopes and what they grant (API §2). A route needs one permission; a token acts with the
 * permissions granted by BOTH its own scopes and its key's current scopes, each expanded first —
 * so an `admin` token signed by a `write` key acts as `write`.
 */
export type Permission = 'repo:read' | 'git:read' | 'git:write' | 'repo:create' | 'repo:update' | 'repo:delete' | 'admin';

const READ: Permission[] = ['repo:read', 'git:read'];
const WRITE: Permission[] = [...READ, 'git:write', 'repo:create', 'repo:update', 'repo:delete'];

export const SCOPE_EXPANSION: Readonly<Record<string, readonly Permission[]>> = {
  read: READ,
  write: WRITE,
  admin: [...WRITE, 'admin'],
  // The overview's narrower names, with their narrow meanings.
  'repo:read': ['repo:read'],
  'git:read': ['repo:read', 'git:read'],
  'git:write': ['repo:read', 'git:read', 'git:write'],
  'repo:create': ['repo:create'],
  'repo:delete': ['repo:delete'],
};

export function isScopeName(name: string): boolean {
  return Object.hasOwn(SCOPE_EXPANSION, name);
}

export function expandScopes(scopes: readonly string[]): Set<Permission> {
  const out = new Set<Permission>();
  // Scope names come from tokens: only the table's own entries count (not `constructor`, `__proto__`).
  for (const s of scopes) if (isScopeName(s)) for (const p of SCOPE_EXPANSION[s]!) out.add(p);
  return out;
}

export function intersect(a: ReadonlySet<Permission>, b: ReadonlySet<Permission>): Set<Permission> {
  return new Set([...a].filter((p) => b.has(p)));
}

/** The fewest scope names that describe a permission set (for `whoami`). */
export function scopeNamesFor(perms: ReadonlySet<Permission>): string[] {
  const names: string[] = [];
  const covered = new Set<Permission>();
  for (const name of ['admin', 'write', 'read', 'git:write', 'git:read', 'repo:read', 'repo:create', 'repo:delete']) {
    const grants = SCOPE_EXPANSION[name]!;
    if (grants.every((p) => perms.has(p)) && grants.some((p) => !covered.has(p))) {
      names.push(name);
      for (const p of grants) covered.add(p);
    }
  }
  return names;
}
