// Internal: not exported from the package entry.
// JSON text as Python's `json` module writes it: standard JSON plus the bare tokens `NaN`,
// `Infinity` and `-Infinity`, which `json.dumps` writes for float('nan') and float('±inf') by
// default (allow_nan=True) and `json.loads` reads back. The rule: a text JSON.parse accepts is its
// answer (the fast path, every ordinary line); a text it refuses that holds one of those tokens is
// read by the strict parser below — the JSON grammar with those three tokens as numbers, nothing
// more — and anything that parser refuses too fails with JSON.parse's own error.

/** `text` parsed as Python's json.loads would (JSON.parse's error when it is not JSON even so). */
export function parsePythonJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    if (!text.includes('NaN') && !text.includes('Infinity')) throw error;
    try {
      return new Parser(text).document();
    } catch {
      throw error;
    }
  }
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const WORDS: readonly [string, unknown][] = [['true', true], ['false', false], ['null', null], ['NaN', NaN], ['Infinity', Infinity], ['-Infinity', -Infinity]];

class Parser {
  #at = 0;
  readonly #text: string;

  constructor(text: string) {
    this.#text = text;
  }

  document(): unknown {
    const v = this.#value();
    this.#space();
    if (this.#at !== this.#text.length) throw new SyntaxError('text after the value');
    return v;
  }

  #value(): unknown {
    this.#space();
    const c = this.#text[this.#at];
    if (c === '{') return this.#object();
    if (c === '[') return this.#array();
    if (c === '"') return this.#string();
    for (const [word, value] of WORDS) {
      if (this.#text.startsWith(word, this.#at)) {
        this.#at += word.length;
        return value;
      }
    }
    NUMBER.lastIndex = this.#at;
    const m = NUMBER.exec(this.#text);
    if (m === null) throw new SyntaxError(`no value at ${this.#at}`);
    this.#at += m[0].length;
    return Number(m[0]);
  }

  #object(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    this.#at++;
    this.#space();
    if (this.#eat('}')) return out;
    do {
      this.#space();
      if (this.#text[this.#at] !== '"') throw new SyntaxError(`no key at ${this.#at}`);
      const key = this.#string();
      this.#space();
      if (!this.#eat(':')) throw new SyntaxError(`no colon at ${this.#at}`);
      // As JSON.parse: an own property even for "__proto__"; a repeated key keeps its last value.
      Object.defineProperty(out, key, { value: this.#value(), writable: true, enumerable: true, configurable: true });
      this.#space();
    } while (this.#eat(','));
    if (!this.#eat('}')) throw new SyntaxError(`no closing brace at ${this.#at}`);
    return out;
  }

  #array(): unknown[] {
    const out: unknown[] = [];
    this.#at++;
    this.#space();
    if (this.#eat(']')) return out;
    do out.push(this.#value());
    while ((this.#space(), this.#eat(',')));
    if (!this.#eat(']')) throw new SyntaxError(`no closing bracket at ${this.#at}`);
    return out;
  }

  /** A string literal, decoded by JSON.parse (escapes, and its refusal of raw control characters). */
  #string(): string {
    const start = this.#at++;
    const t = this.#text;
    while (this.#at < t.length && t[this.#at] !== '"') this.#at += t[this.#at] === '\\' ? 2 : 1;
    if (this.#at >= t.length) throw new SyntaxError('unterminated string');
    this.#at++;
    return JSON.parse(t.slice(start, this.#at)) as string;
  }

  #space(): void {
    const t = this.#text;
    while (this.#at < t.length && (t[this.#at] === ' ' || t[this.#at] === '\t' || t[this.#at] === '\n' || t[this.#at] === '\r')) this.#at++;
  }

  #eat(c: string): boolean {
    if (this.#text[this.#at] !== c) return false;
    this.#at++;
    return true;
  }
}
