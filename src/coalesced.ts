/**
 * A call that runs `run` once, deferred by `defer`, however many times it is made before then:
 * several causes in one turn cost one run, and the run sees all of them.
 */
export function coalesced(defer: (task: () => void) => void, run: () => void): () => void {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    defer(() => {
      queued = false;
      run();
    });
  };
}
