#!/usr/bin/env node
// The CLI is compiled to dist/; build once if it is missing so `npx repohost` works in a checkout.
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entry = join(root, 'dist', 'src', 'cli', 'main.js');
if (!existsSync(entry)) execFileSync('npx', ['tsc', '-p', join(root, 'tsconfig.json')], { cwd: root, stdio: 'inherit' });
await import(entry);
