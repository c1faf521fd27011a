/**
 * jj's `Merge<T>`: the value of something that may be conflicted, as alternating terms
 * `[side0, base0, side1, base1, …, sideN]` (an odd count). Read it as side0 + (side1 − base0) + …:
 * every base is the state its following side was derived from. A one-term merge is resolved.
 *
 * The same order is written in a conflicted commit's `jj:trees` header, so a tree set read from a
 * commit and a `Merge<string>` of tree oids are the same thing.
 */
export type Merge<T> = readonly T[];

export function assertValidMerge<T>(merge: Merge<T>): void {
  if (merge.length % 2 !== 1) throw new Error(`a merge needs an odd number of terms, got ${merge.length}`);
}

/**
 * Joins diffs A→B and B→C into A→C and drops no-op diffs A→A, exactly as jj's
 * `Merge::simplify` does (same term order), so that simplified tree sets match jj's.
 */
export function simplifyMerge<T>(merge: Merge<T>, key: (value: T) => string): Merge<T> {
  assertValidMerge(merge);
  const keys = merge.map(key);
  const mapping = merge.map((_, i) => i);
  let addIndex = 0;
  while (addIndex < mapping.length) {
    const addKey = keys[mapping[addIndex]!];
    let removeIndex = -1;
    for (let i = 1; i < mapping.length; i += 2) {
      if (keys[mapping[i]!] === addKey) {
        removeIndex = i;
        break;
      }
    }
    if (removeIndex >= 0) {
      // Align the add with the diff of the matching remove, then delete that pair.
      const tmp = mapping[removeIndex + 1]!;
      mapping[removeIndex + 1] = mapping[addIndex]!;
      mapping[addIndex] = tmp;
      mapping.splice(removeIndex, 2);
    } else {
      addIndex += 2;
    }
  }
  return mapping.map((i) => merge[i]!);
}

/**
 * The value a merge trivially resolves to, or `undefined` when it does not: terms that cancel out
 * leave one value, and when every side made the same change that change wins (git's rule,
 * jj's `SameChange::Accept`). `key` decides equality.
 */
export function trivialMerge<T>(merge: Merge<T>, key: (value: T) => string): { value: T } | undefined {
  assertValidMerge(merge);
  if (merge.length === 1) return { value: merge[0]! };
  if (merge.length === 3) {
    const [add0, remove, add1] = merge as [T, T, T];
    const k0 = key(add0);
    const kr = key(remove);
    const k1 = key(add1);
    if (k0 === k1) return { value: add0 };
    if (k0 === kr) return { value: add1 };
    if (k1 === kr) return { value: add0 };
    return undefined;
  }
  const counts = new Map<string, { value: T; count: number }>();
  merge.forEach((value, i) => {
    const k = key(value);
    const entry = counts.get(k);
    if (entry) entry.count += i % 2 === 0 ? 1 : -1;
    else counts.set(k, { value, count: i % 2 === 0 ? 1 : -1 });
  });
  const remaining = [...counts.values()].filter((e) => e.count !== 0);
  if (remaining.length === 1) return { value: remaining[0]!.value };
  if (remaining.length === 2) {
    const positive = remaining.find((e) => e.count > 0);
    if (positive) return { value: positive.value };
  }
  return undefined;
}

/**
 * Flattens a merge of merges into one merge, as jj's `Merge::flatten` does: each negative outer
 * term contributes its terms inverted (rotated so the diffs stay paired).
 */
export function flattenMerge<T>(outer: Merge<Merge<T>>): Merge<T> {
  assertValidMerge(outer);
  const result: T[] = [...outer[0]!];
  for (let i = 1; i < outer.length; i += 2) {
    const remove = [...outer[i]!];
    remove.push(remove.shift()!);
    for (let j = 0; j + 1 < remove.length; j += 2) {
      const tmp = remove[j]!;
      remove[j] = remove[j + 1]!;
      remove[j + 1] = tmp;
    }
    result.push(...remove, ...outer[i + 1]!);
  }
  return result;
}
