// The `stoker` command: `stoker demo`, `stoker bench`, `stoker inspect <path>`, `stoker serve` (bin/stoker.js runs
// `main`). The rule: commands throw, this file reports — one line on stderr (the stack only under
// --verbose), a JSON error document on stdout under --json, and the exit codes of errors.ts.

import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { benchCommand } from './bench.js';
import { runCleanups } from './cleanup.js';
import { demoCommand } from './demo.js';
import { EXIT, describeFailure } from './errors.js';
import { inspectCommand } from './inspect.js';
import { serveCommand } from './serve.js';
import { docPath } from './ui.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export function buildProgram(): Command {
  const program = new Command('stoker')
    .description('Stoker — a data loader for machine learning in TypeScript. Run `stoker demo` to see it train a model.')
    .version(VERSION, '-V, --version', 'print the version')
    .option('--verbose', 'on errors, print the stack trace and causes')
    .helpOption('-h, --help', 'show help')
    .showSuggestionAfterError(true)
    .exitOverride()
    // commander's own error text is replaced by the one line main() prints.
    .configureOutput({ outputError: () => {} });
  program.addHelpText('after', `
Exit codes: 0 ok · 1 the command failed (bad file, loader error) · 2 bad command line · 130 interrupted.
Docs: ${docPath('cli.md')}; the figures: ${docPath('stats.md')}.`);
  for (const command of [demoCommand(), benchCommand(), inspectCommand(), serveCommand()]) {
    command.helpOption('-h, --help', 'show help').exitOverride().configureOutput({ outputError: () => {} });
    program.addCommand(command);
  }
  return program;
}

/** Run the command line `argv` (without node and the script); resolves to the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  const onInterrupt = () => {
    runCleanups();
    process.stderr.write('\nstoker: interrupted\n');
    process.exit(EXIT.interrupted);
  };
  process.once('SIGINT', onInterrupt);
  const program = buildProgram();
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    const { code, exitCode } = error as { code?: unknown; exitCode?: unknown };
    // --help, `help <command>` and --version end parsing through exitOverride with exit code 0;
    // a bare `stoker` shows the help on stderr with exit code 1, which is a usage error here.
    if (code === 'commander.helpDisplayed' || code === 'commander.version' || (code === 'commander.help' && exitCode === 0)) return EXIT.ok;
    if (code === 'commander.help') return EXIT.usage;
    const name = commandName(program, argv);
    const failure = describeFailure(error, name);
    const verbose = argv.includes('--verbose');
    if (argv.includes('--json')) process.stdout.write(`${JSON.stringify(failure.json, null, 2)}\n`);
    process.stderr.write(`${failure.line}\n`);
    if (verbose && failure.detail !== undefined) process.stderr.write(`${failure.detail}\n`);
    return failure.exitCode;
  } finally {
    process.off('SIGINT', onInterrupt);
  }
}

/** "stoker demo" when argv names a known command, else "stoker". */
function commandName(program: Command, argv: readonly string[]): string {
  const first = argv.find((a) => !a.startsWith('-'));
  return first !== undefined && program.commands.some((c) => c.name() === first) ? `stoker ${first}` : 'stoker';
}
