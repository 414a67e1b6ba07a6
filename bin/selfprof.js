#!/usr/bin/env node
'use strict';
// The selfprof command line: dispatches to the command's module in lib/cli/. Errors are one
// line on stderr and exit code 1; progress goes to stderr, results to stdout or files.

const { USAGE, UsageError } = require('../lib/cli/args');

// A reader that went away (`selfprof convert ... | head`) ends the output quietly.
process.stdout.on('error', (err) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(process.exitCode ?? 0);
});

/** Each command's module, loaded only when it runs. */
const COMMANDS = {
  convert: () => require('../lib/cli/convert').convertCommand,
  report: () => require('../lib/cli/report').reportCommand,
  record: () => require('../lib/cli/record').recordCommand,
  diff: () => require('../lib/cli/diff').diffCommand,
};

async function main(argv) {
  const [command, ...rest] = argv;
  if (command === '--version' || command === '-v' || command === 'version') {
    process.stdout.write(`selfprof ${require('../package.json').version}\n`);
    return 0;
  }
  if (Object.hasOwn(COMMANDS, command ?? '')) return COMMANDS[command]()(rest);
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  throw new UsageError(command ? `unknown command ${command}` : 'no command');
}

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    // One line, whatever went wrong: usage mistakes point at --help.
    process.stderr.write(`selfprof: ${err.message}${err instanceof UsageError ? ' (selfprof --help shows usage)' : ''}\n`);
    process.exitCode = 1;
  },
);
