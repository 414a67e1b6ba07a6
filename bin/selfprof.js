#!/usr/bin/env node
'use strict';
// The selfprof command line. Errors are one line on stderr and exit code 1.
//
//   selfprof convert FILE --to cpuprofile|folded [-o OUT]
//       FILE: a selfprof trace (.json, or json-gzip .json.gz)

const fs = require('node:fs');

const USAGE = `usage: selfprof convert FILE --to cpuprofile|folded [-o OUT]`;

class UsageError extends Error {}

function parse(argv) {
  const [command, ...rest] = argv;
  const args = { command, positional: [] };
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    if (a === '--to' || a === '-o' || a === '--out') {
      if (i + 1 >= rest.length) throw new UsageError(`${a} needs a value`);
      args[a === '--to' ? 'to' : 'out'] = rest[++i];
    } else if (a.startsWith('-')) {
      throw new UsageError(`unknown option ${a}`);
    } else {
      args.positional.push(a);
    }
  }
  return args;
}

function convertCommand(args) {
  const [file] = args.positional;
  if (!file || args.positional.length > 1) throw new UsageError('convert takes one FILE');
  if (!args.to) throw new UsageError('convert needs --to cpuprofile|folded');
  let bytes;
  try {
    bytes = fs.readFileSync(file);
  } catch (err) {
    throw new Error(`cannot read ${file}: ${err.code ?? err.message}`);
  }
  if (bytes.length === 0) throw new Error(`${file} is empty`);
  const { convert } = require('..');
  let out;
  try {
    out = convert(bytes, { to: args.to });
  } catch (err) {
    const reason = err.code === 'Z_BUF_ERROR' || err.code === 'Z_DATA_ERROR' ? 'truncated or corrupt gzip' : err.message.replace(/^convert: /, '');
    throw new Error(`${file}: ${reason}`);
  }
  if (args.out) fs.writeFileSync(args.out, out);
  else process.stdout.write(out);
}

function main(argv) {
  const args = parse(argv);
  if (args.command === 'convert') return convertCommand(args);
  throw new UsageError(args.command ? `unknown command ${args.command}` : 'no command');
}

try {
  main(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`selfprof: ${err.message}${err instanceof UsageError ? `\n${USAGE}` : ''}\n`);
  process.exitCode = 1;
}
