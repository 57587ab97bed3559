/**
 * "Did you mean": the closest of a set of names to a mistyped one, by
 * optimal string alignment (Levenshtein plus adjacent transpositions) or a
 * unique prefix; nothing when the closest is too far to be a typo.
 */

/** Edits (insert, delete, substitute, swap neighbours) between `a` and `b`. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    const row = d[i] as number[];
    const prev = d[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        v = Math.min(v, ((d[i - 2] as number[])[j - 2] as number) + 1);
      }
      row[j] = v;
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

/** The candidate `word` most likely meant, or undefined when none is close enough. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  const list = [...candidates];
  const prefixed = list.filter((c) => word.length >= 3 && c.startsWith(word));
  if (prefixed.length === 1) return prefixed[0];
  // A quarter of the word's length, at least one edit and at most three: beyond that it is another word.
  const limit = Math.min(3, Math.max(1, Math.floor(word.length / 4)));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const c of list) {
    const dist = editDistance(word.toLowerCase(), c.toLowerCase());
    if (dist < bestDistance) {
      best = c;
      bestDistance = dist;
    }
  }
  return best;
}

/** `; did you mean X?` for the closest candidate, or the empty string. */
export function didYouMean(word: string, candidates: Iterable<string>, quote = false): string {
  const c = closest(word, candidates);
  if (c === undefined) return '';
  return `; did you mean ${quote ? JSON.stringify(c) : c}?`;
}
