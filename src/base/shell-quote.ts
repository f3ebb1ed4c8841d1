/** Words every POSIX shell takes literally without quotes. */
const PLAIN = /^[A-Za-z0-9_@%+=:,./-]+$/;

/** A word in single quotes, each `'` written as `'\''`: every POSIX shell takes it literally. */
export function singleQuoted(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** One word for a POSIX shell: as it is when every shell takes it literally, else single-quoted. */
export function shellQuote(word: string): string {
  return PLAIN.test(word) ? word : singleQuoted(word);
}
