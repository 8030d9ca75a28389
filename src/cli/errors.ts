// How the `stoker` command fails: one line on stderr, the stack only under --verbose, and an exit
// code that says whose fault it was. The rule: a command never calls process.exit itself; it throws,
// and main.ts turns the error into a line and a code here.

import { CommanderError } from 'commander';
import { LoaderError, describeCause } from '../errors.js';

/** Exit codes of `stoker` (documented in docs/cli.md and in `stoker --help`). */
export const EXIT = {
  /** The command did what it was asked. */
  ok: 0,
  /** The command ran and failed: a bad file, a dataset or loader error, an I/O failure. */
  failure: 1,
  /** The command line is wrong: unknown command or option, a bad value, a path that does not exist. Nothing ran. */
  usage: 2,
  /** Interrupted (Ctrl-C, SIGINT). */
  interrupted: 130,
} as const;

/** A bad command line found after commander parsed it (a path that does not exist, an option combination). */
export class UsageError extends Error {
  override name = 'UsageError';
}

export interface FailureReport {
  readonly exitCode: number;
  /** The one line for stderr (no trailing newline). */
  readonly line: string;
  /** Stack and causes, for --verbose. */
  readonly detail: string | undefined;
  /** What --json prints on stdout. */
  readonly json: { ok: false; error: { code: string; message: string; exitCode: number } };
}

/** Classify an error thrown while parsing or running a command. `command` names it in the line ("stoker demo"). */
export function describeFailure(error: unknown, command: string): FailureReport {
  let exitCode: number = EXIT.failure;
  let code = 'ERR_FAILED';
  let message: string;
  if (error instanceof CommanderError) {
    exitCode = EXIT.usage;
    code = 'ERR_USAGE';
    // commander's messages read "error: unknown option '--x'"; the prefix is ours to add.
    message = `${error.message.replace(/^error:\s*/i, '').trim()} (see '${command} --help')`;
  } else if (error instanceof UsageError) {
    exitCode = EXIT.usage;
    code = 'ERR_USAGE';
    message = `${error.message} (see '${command} --help')`;
  } else if (error instanceof LoaderError) {
    code = error.code;
    message = error.message;
  } else {
    const errno = (error as { code?: unknown } | null)?.code;
    if (typeof errno === 'string') code = errno;
    message = describeCause(error);
  }
  const line = `${command}: ${error instanceof LoaderError ? `${error.code}: ` : ''}${oneLine(message)}`;
  return { exitCode, line, detail: error instanceof CommanderError ? undefined : stackOf(error), json: { ok: false, error: { code, message: oneLine(message), exitCode } } };
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').trim();
}

/** The stack with each cause's stack below it. */
function stackOf(error: unknown): string | undefined {
  const parts: string[] = [];
  let e: unknown = error;
  for (let depth = 0; e !== undefined && depth < 8; depth++) {
    if (e instanceof Error) parts.push(`${depth === 0 ? '' : 'caused by: '}${e.stack ?? `${e.name}: ${e.message}`}`);
    else parts.push(`${depth === 0 ? '' : 'caused by: '}${describeCause(e)}`);
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.length === 0 ? undefined : parts.join('\n');
}
