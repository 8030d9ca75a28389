// What a command prints and where. The rule: with --json, stdout carries exactly one JSON document
// and nothing else; progress bars appear only when stdout is a terminal and not in CI; without a
// terminal, progress is one plain line per epoch, and a long step (writing files) announces itself
// in one line before it starts, so a log never looks hung.

import { fileURLToPath } from 'node:url';
import cliProgress from 'cli-progress';

/**
 * A page of the documentation as a path on this machine: docs/ ships in the package, so the path
 * works in an installed package as in a clone (this file is src/cli/ui.ts or dist/cli/ui.js).
 */
export function docPath(page: string): string {
  return fileURLToPath(new URL(`../../docs/${page}`, import.meta.url));
}

export interface UiOptions {
  readonly json: boolean;
  /** `--no-progress` sets this false. */
  readonly progress: boolean;
}

/** A per-epoch progress display: a live bar on a terminal, nothing otherwise. */
export interface Progress {
  update(value: number, fields: Record<string, string>): void;
  /** Clear the bar: the command prints the epoch's line in its place. */
  stop(): void;
}

/** A progress display that shows nothing. */
export const NO_PROGRESS: Progress = { update() {}, stop() {} };

export class Ui {
  readonly json: boolean;
  /** Live bars: stdout is a TTY, not CI, not --json, progress not turned off. */
  readonly bars: boolean;
  readonly #out: NodeJS.WriteStream;

  constructor(options: UiOptions, out: NodeJS.WriteStream = process.stdout, env: NodeJS.ProcessEnv = process.env) {
    this.json = options.json;
    this.#out = out;
    this.bars = !options.json && options.progress && out.isTTY === true && !isCi(env);
  }

  /** A line of human output on stdout (nothing under --json). */
  line(text = ''): void {
    if (!this.json) this.#out.write(`${text}\n`);
  }

  /** The single JSON document of a --json run. */
  emit(document: unknown): void {
    this.#out.write(`${JSON.stringify(document, null, 2)}\n`);
  }

  /**
   * A long step that is not an epoch: prints `line` at once (terminal or not), then, on a terminal,
   * a bar of `format` below it until `stop()`. The caller prints the line that says it is done.
   */
  task(line: string, format: string, total: number): Progress {
    this.line(line);
    return this.progress(format, total, {});
  }

  /** A progress bar with `format` ({bar}, {value}, {total}, {percentage} and the keys passed to update). */
  progress(format: string, total: number, fields: Record<string, string>): Progress {
    if (!this.bars) return NO_PROGRESS;
    const bar = new cliProgress.SingleBar(
      { format, stream: this.#out, hideCursor: true, barsize: 24, fps: 8, barCompleteChar: '█', barIncompleteChar: '░', clearOnComplete: true, autopadding: true },
      cliProgress.Presets.shades_classic,
    );
    bar.start(total, 0, fields);
    return {
      update: (value, f) => bar.update(value, f),
      stop: () => bar.stop(),
    };
  }
}

function isCi(env: NodeJS.ProcessEnv): boolean {
  const ci = env.CI;
  return ci !== undefined && ci !== '' && ci !== '0' && ci.toLowerCase() !== 'false';
}

export interface Column<R> {
  readonly title: string;
  readonly align?: 'left' | 'right';
  readonly cell: (row: R) => string;
}

/** A plain-text table: a header, a rule, then one line per row; columns padded to their widest cell. */
export function table<R>(rows: readonly R[], columns: readonly Column<R>[]): string {
  const cells = rows.map((r) => columns.map((c) => c.cell(r)));
  const widths = columns.map((c, i) => Math.max(width(c.title), ...cells.map((row) => width(row[i]!))));
  const pad = (s: string, i: number) => (columns[i]!.align === 'right' ? ' '.repeat(widths[i]! - width(s)) + s : s + ' '.repeat(widths[i]! - width(s)));
  const lines = [columns.map((c, i) => pad(c.title, i)).join('  '), widths.map((w) => '─'.repeat(w)).join('  '), ...cells.map((row) => row.map(pad).join('  '))];
  return lines.map((l) => l.trimEnd()).join('\n');
}

/** Key–value lines, keys padded: for a summary. */
export function pairs(entries: readonly (readonly [string, string])[]): string {
  const w = Math.max(...entries.map(([k]) => width(k)));
  return entries.map(([k, v]) => `${k}${' '.repeat(w - width(k))}  ${v}`).join('\n');
}

function width(s: string): number {
  return [...s].length;
}
