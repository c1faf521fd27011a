// Counts test results in tap's TAP output: every named test inside a test file is one result;
// a file that failed without any failing named test (a crash, a timeout) counts as one failure.
import { readFileSync } from 'node:fs';

const lines = readFileSync(process.argv[2], 'utf8').split('\n');
let passed = 0;
let failed = 0;
let nestedFailures = 0;
for (const line of lines) {
  if (/^    ok \d+/.test(line)) passed++;
  else if (/^    not ok \d+/.test(line)) {
    failed++;
    nestedFailures++;
  } else if (/^ok \d+/.test(line)) nestedFailures = 0;
  else if (/^not ok \d+/.test(line)) {
    if (nestedFailures === 0) failed++;
    nestedFailures = 0;
  }
}
if (passed + failed === 0) {
  console.log('no test results found');
  process.exit(1);
}
console.log(`${passed} passed, ${failed} failed`);
