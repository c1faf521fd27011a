// Counts test results in tap's TAP output: every named test inside a test file is one result;
// a file that failed without any failing named test (a crash, a timeout) counts as one failure.
// Before the count it lists each failure with the file and test it sits in and the start of its
// diagnostics, so a failed run on record says what failed without the whole log.
import { readFileSync } from 'node:fs';

const lines = readFileSync(process.argv[2], 'utf8').split('\n');
const DIAGNOSTIC_LINES = 16;
let passed = 0;
let failed = 0;
let nestedFailures = 0;
let file = '';
let test = '';
let assertionFailures = 0;
const report = [];

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
  let m;
  if ((m = /^# Subtest: (.*)$/.exec(line))) file = m[1];
  else if ((m = /^    # Subtest: (.*)$/.exec(line))) {
    test = m[1];
    assertionFailures = 0;
  } else if (/^    ok \d+/.test(line)) passed++;
  else if (/^    not ok \d+/.test(line)) {
    failed++;
    nestedFailures++;
    if (assertionFailures === 0) report.push(`- ${file} > ${line.trim()}`, ...diagnostics(i + 1, '    '));
  } else if (/^        not ok \d+/.test(line)) {
    assertionFailures++;
    report.push(`- ${file} > ${test} > ${line.trim()}`, ...diagnostics(i + 1, '        '));
  } else if (/^ok \d+/.test(line)) nestedFailures = 0;
  else if (/^not ok \d+/.test(line)) {
    if (nestedFailures === 0) {
      failed++;
      report.push(`- ${line.trim()}`, ...diagnostics(i + 1, ''));
    }
    nestedFailures = 0;
  }
}
if (passed + failed === 0) {
  console.log('no test results found');
  process.exit(1);
}
if (report.length > 0) console.log(['', 'failures:', ...report, ''].join('\n'));
console.log(`${passed} passed, ${failed} failed`);
