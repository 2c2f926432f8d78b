/**
 * How names and keywords are compared: AList matches every whitespace-separated keyword as a
 * case-insensitive substring of the name. Both sides are folded the same way here — Unicode NFC
 * (so a name stored decomposed, as macOS writes `é`, matches a keyword typed composed, and the
 * reverse) then lower case — and the index keeps the folded name in its own column.
 */

/**
 * The folded form of a name or keyword. toLowerCase lowers a capital sigma by its place in the
 * word (`ς` at the end, `σ` inside), so the keyword `ΠΑΣ` (`πας`) was not found in `ΠΑΣΑ` (`πασα`):
 * both forms fold to `σ`, as Unicode case folding has it.
 */
export function fold(s: string): string {
  return s.normalize('NFC').toLowerCase().replaceAll('ς', 'σ');
}

/** Keywords of a query, folded, without duplicates. An empty list matches every entry. */
export function keywordsOf(query: string): string[] {
  return [...new Set(fold(query).split(/\s+/u).filter(Boolean))];
}

/**
 * Bounds of one query. Every keyword costs the planner a look-up per trigram and the SQL one more
 * term (about 1,000 terms exceed SQLite's expression depth), all on the event loop, so an unbounded
 * query could freeze the server for seconds, and guests may search. Nothing useful is lost: a file
 * name is at most 255 bytes, so a keyword longer than that can never match, and a name holding
 * every keyword holds them all within those 255 bytes (UTF-16 units never outnumber UTF-8 bytes).
 */
export const MAX_KEYWORDS_LENGTH = 512;
export const MAX_KEYWORDS = 32;

/** keywordsOf, or the reason the query is refused (the REST layer answers it with a 400). */
export function boundedKeywords(query: string): { keywords: string[] } | { error: string } {
  // Checked before folding or splitting: those are the first costs of a huge text.
  if (query.length > MAX_KEYWORDS_LENGTH) return { error: `keywords too long: at most ${MAX_KEYWORDS_LENGTH} characters` };
  const keywords = keywordsOf(query);
  if (keywords.length > MAX_KEYWORDS) return { error: `too many keywords: at most ${MAX_KEYWORDS}` };
  return { keywords };
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
