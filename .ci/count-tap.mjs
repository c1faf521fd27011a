// Counts test results in tap's TAP output: every named test inside a test file is one result;
// a file that failed without any failing named test (a crash, a timeout) counts as one failure.
// Before the count it lists each failure, at whatever depth of subtests, with the path of tests it
// sits in and the start of its diagnostics, so a failed run on record says what failed.
import { readFileSync } from 'node:fs';

const lines = readFileSync(process.argv[2], 'utf8').split('\n');
const DIAGNOSTIC_LINES = 16;
let passed = 0;
let failed = 0;
let nestedFailures = 0;
const report = [];
/** Subtest names by depth (4 spaces a level). */
const names = [];
/** By depth: the report's length when the subtest whose results sit at that depth began. */
const reportedAt = [];

function diagnostics(from, indent) {
  const out = [];
  for (let i = from; i < lines.length && out.length < DIAGNOSTIC_LINES; i++) {
    const line = lines[i];
    if (!line.startsWith(indent + '  ')) break;
    out.push(line);
    if (line.trim() === '...') break;
  }
  return out;
}

for (let i = 0; i < lines.length; i++) {
  const line = lines[i];
  const m = /^((?: {4})*)(# Subtest: (.*)|(not )?ok \d+)/.exec(line);
  if (!m) continue;
  const depth = m[1].length / 4;
  if (m[3] !== undefined) {
    names[depth] = m[3];
    reportedAt[depth + 1] = report.length;
    continue;
  }
  const ok = m[4] === undefined;
  // A failing subtest whose failures inside were already listed is not listed again.
  if (!ok && !(report.length > (reportedAt[depth + 1] ?? Infinity))) {
    report.push(`- ${[...names.slice(0, depth), line.trim()].join(' > ')}`, ...diagnostics(i + 1, m[1]));
  }
  reportedAt[depth + 1] = Infinity;
  if (depth === 1) {
    if (ok) passed++;
    else {
      failed++;
      nestedFailures++;
    }
  } else if (depth === 0) {
    if (!ok && nestedFailures === 0) failed++;
    nestedFailures = 0;
  }
}
if (passed + failed === 0) {
  console.log('no test results found');
  process.exit(1);
}
if (report.length > 0) console.log(['', 'failures:', ...report, ''].join('\n'));
console.log(`${passed} passed, ${failed} failed`);
