/**
 * How the change model fails, in its own terms. The model knows nothing of HTTP or of the
 * service's error codes: where its errors leave for a client, the service maps each kind to one
 * of its codes (`asServiceError` in src/errors.ts).
 */
export type VcsErrorKind =
  /** A path not in its one normal form (paths.ts). */
  | 'invalid-path'
  /** An edit the tree cannot take: a file where a directory is needed, a directory replaced by a file. */
  | 'invalid-edit'
  /** An edit or a rule names a path that is not there. */
  | 'missing-path'
  /** A conflict resolution that does not fit the conflict it names. */
  | 'invalid-resolution'
  /** What was asked leaves conflicts; the details list them. */
  | 'conflict'
  /** Stored objects or the change graph break an invariant of the model. */
  | 'corrupt'
  /** A request the model cannot take as it is (a malformed change id, a name given twice). */
  | 'invalid-request'
  | 'change-not-found'
  | 'bookmark-not-found'
  | 'bookmark-exists'
  /** A guard lost: what the writer expected is no longer the state. */
  | 'stale'
  /** Bookmark moves that would not advance history; the details name them. */
  | 'history-rewrite';

export class VcsError extends Error {
  constructor(
    readonly kind: VcsErrorKind,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'VcsError';
  }
}

/** The same failure said of the op at `index` of a request's list (`ops[3]: …`, with `op_index`). */
export function inOp(err: VcsError, list: string, index: number): VcsError {
  return new VcsError(err.kind, `${list}[${index}]: ${err.message}`, { ...err.details, op_index: index });
}
