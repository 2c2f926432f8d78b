/**
 * How names and keywords are compared: AList matches every whitespace-separated keyword as a
 * case-insensitive substring of the name. Both sides are folded the same way here — Unicode NFC
 * (so a name stored decomposed, as macOS writes `é`, matches a keyword typed composed, and the
 * reverse) then lower case — and the index keeps the folded name in its own column.
 */

/** The folded form of a name or keyword. */
export function fold(s: string): string {
  return s.normalize('NFC').toLowerCase();
}

/** Keywords of a query, folded, without duplicates. An empty list matches every entry. */
export function keywordsOf(query: string): string[] {
  return [...new Set(fold(query).split(/\s+/u).filter(Boolean))];
}

/** The trigram index answers substrings of at least three characters (code points); shorter ones are scanned. */
export const TRIGRAM = 3;

export function indexable(keyword: string): boolean {
  return [...keyword].length >= TRIGRAM;
}

/** An FTS5 phrase matching the keyword as a substring (double quotes escaped by doubling). */
export function phrase(keyword: string): string {
  return `"${keyword.replaceAll('"', '""')}"`;
}
