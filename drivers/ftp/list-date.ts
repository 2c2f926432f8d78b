/**
 * Dates from Unix-style LIST lines (servers without MLSD, like vsftpd): `Mar 04 05:06` (within the
 * last six months, year implied) or `Mar 04  2021`. Times are taken as UTC, as vsftpd sends them.
 */
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];

export function parseListDate(raw: string | undefined, now: Date): Date | undefined {
  const m = /^([A-Za-z]{3})\s+(\d{1,2})\s+(?:(\d{1,2}):(\d{2})|(\d{4}))$/.exec((raw ?? '').trim());
  if (!m) return undefined;
  const month = MONTHS.indexOf(m[1]!.toLowerCase());
  if (month < 0) return undefined;
  const day = Number(m[2]);
  if (m[5]) return new Date(Date.UTC(Number(m[5]), month, day));
  let year = now.getUTCFullYear();
  const d = new Date(Date.UTC(year, month, day, Number(m[3]), Number(m[4])));
  // A recent-format date "in the future" belongs to last year.
  if (d.getTime() > now.getTime() + 24 * 3600_000) year -= 1;
  return new Date(Date.UTC(year, month, day, Number(m[3]), Number(m[4])));
}
