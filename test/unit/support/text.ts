import fc from 'fast-check';

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/** True when no surrogate half stands alone. */
export function wellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (isHigh(c)) {
      if (!isLow(s.charCodeAt(i + 1))) return false;
      i++;
    } else if (isLow(c)) return false;
  }
  return true;
}

/** What a cap of `cap` keeps of `all`: the newest `cap` characters, one fewer if that would split a pair. */
export function expectedTail(all: string, cap: number): string {
  if (all.length <= cap) return all;
  let start = all.length - cap;
  if (isLow(all.charCodeAt(start)) && isHigh(all.charCodeAt(start - 1))) start++;
  return all.slice(start);
}

/** Text rich in multi-unit characters: astral (surrogate pairs), BMP non-ASCII, ASCII, newlines. */
export const richText = (maxLength = 40) =>
  fc.string({
    unit: fc.oneof(
      fc.constantFrom('a', 'Z', ' ', '\n', 'é', '€', '中', '😀', '𝄞', '🇫🇷'),
      fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
    ),
    maxLength,
  });
