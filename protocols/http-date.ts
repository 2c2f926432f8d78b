/**
 * HTTP-date parsing for conditional requests (If-Modified-Since, If-Unmodified-Since, If-Range) and
 * the dates WebDAV clients send, as Go's http.ParseTime reads them: RFC 9110's IMF-fixdate
 * (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms it requires recipients to accept,
 * RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`), all UTC.
 *
 * JavaScript's Date.parse accepts far more: `1` is 2001-01-01 and `2023` is 2023-01-01, in the
 * server's local time when no zone is given. Through it a garbage If-Unmodified-Since answered 412
 * and a bare year as If-Modified-Since answered 304 to a client holding nothing, where RFC 9110
 * §13.1.3/§13.1.4 (and AList, through Go's ServeContent) ignore a value that is not a valid date.
 */
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY = '(?:mon|tue|wed|thu|fri|sat|sun)';
const LONG_DAY = '(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)';
const MON = '(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)';
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MON} (\\d{4}) ${TIME} GMT$`, 'i');
const RFC850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MON}-(\\d{2}) ${TIME} GMT$`, 'i');
const ASCTIME = new RegExp(`^${DAY} ${MON} ( ?\\d{1,2}) ${TIME} (\\d{4})$`, 'i');

/** Milliseconds since the epoch (a whole second), or undefined when `text` is not an HTTP-date. */
export function parseHttpDate(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const v = text.trim();
  let parts: [day: string, mon: string, year: number, h: string, m: string, s: string] | undefined;
  let m = IMF_FIXDATE.exec(v);
  if (m) parts = [m[1]!, m[2]!, Number(m[3]), m[4]!, m[5]!, m[6]!];
  else if ((m = RFC850.exec(v))) {
    const yy = Number(m[3]); // Go's rule for two-digit years: 69-99 → 19xx, 00-68 → 20xx
    parts = [m[1]!, m[2]!, yy >= 69 ? 1900 + yy : 2000 + yy, m[4]!, m[5]!, m[6]!];
  } else if ((m = ASCTIME.exec(v))) parts = [m[2]!.trim(), m[1]!, Number(m[6]), m[3]!, m[4]!, m[5]!];
  if (!parts) return undefined;
  const [day, mon, year, hh, mm, ss] = parts;
  const month = MONTHS.indexOf(mon.toLowerCase());
  const [d, h, mi, s] = [Number(day), Number(hh), Number(mm), Number(ss)];
  if (h > 23 || mi > 59 || s > 59) return undefined;
  const t = new Date(0);
  t.setUTCFullYear(year, month, d); // not Date.UTC, which reads years 0-99 as 1900-1999
  t.setUTCHours(h, mi, s, 0);
  // A day past the month's end (31 Feb) rolls over into the next month; Go refuses it.
  return t.getUTCDate() === d && t.getUTCMonth() === month ? t.getTime() : undefined;
}

/**
 * False for the modification time of a file whose storage did not give one (drivers use the Unix
 * epoch then). Go's ServeContent (AList) sends no Last-Modified for it and ignores the date
 * preconditions: compared, any If-Modified-Since answered 304 to a client holding an old copy.
 */
export function knownModTime(d: Date): boolean {
  return d.getTime() !== 0;
}
