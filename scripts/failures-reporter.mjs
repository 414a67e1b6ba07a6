// A node:test reporter for npm test's last lines: each failing test's file, name and the
// start of its assertion's message, a few short lines each. A CI log is often seen only by
// its tail, and the spec reporter's tail is the last failure's stack, not what failed.
import path from 'node:path';

const WIDTH = 160;
const LINES = 8;

export default async function* failures(source) {
  for await (const event of source) {
    if (event.type !== 'test:fail') continue;
    const { name, file, details } = event.data;
    // A suite whose tests failed says nothing of its own: its tests are listed.
    if (details?.error?.failureType === 'subtestsFailed') continue;
    const error = details?.error?.cause ?? details?.error;
    const message = String(error?.message ?? error).replace(/\s+/g, ' ').trim();
    const lines = [];
    for (let at = 0; at < message.length && lines.length < LINES; at += WIDTH) lines.push(`  ${message.slice(at, at + WIDTH)}`);
    if (message.length > WIDTH * LINES) lines.push(`  … (${message.length} characters; the whole message is above)`);
    yield `✖ ${file ? path.basename(file) : '?'}: ${name}\n${lines.join('\n')}\n`;
  }
}
