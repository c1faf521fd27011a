/**
 * Merges sequences that are each ordered by a string id into one ordered sequence (ascending, or
 * descending when `descending`), reading each only as far as the merged output needs: a list
 * kept per shard read as one.
 */
export function* mergeOrdered<T>(sources: Iterable<T>[], idOf: (item: T) => string, descending = false): Generator<T> {
  const heads: Array<{ rest: Iterator<T>; item: T; id: string }> = [];
  for (const source of sources) {
    const rest = source[Symbol.iterator]();
    const first = rest.next();
    if (!first.done) heads.push({ rest, item: first.value, id: idOf(first.value) });
  }
  while (heads.length) {
    // Few sources hold anything at once (most shards have nothing of a given list): a scan beats a heap.
    let best = 0;
    for (let i = 1; i < heads.length; i++) {
      if (descending ? heads[i]!.id > heads[best]!.id : heads[i]!.id < heads[best]!.id) best = i;
    }
    const head = heads[best]!;
    yield head.item;
    const next = head.rest.next();
    if (next.done) heads.splice(best, 1);
    else {
      head.item = next.value;
      head.id = idOf(next.value);
    }
  }
}

/** The first `limit` items of `items`, read no further (a merge, say). */
export function firstOf<T>(items: Iterable<T>, limit: number): T[] {
  const taken: T[] = [];
  if (limit <= 0) return taken;
  for (const item of items) if (taken.push(item) >= limit) break;
  return taken;
}
