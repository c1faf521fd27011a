import fc from 'fast-check';
import { FixtureRef, RawJson, cloneValue, setOwn } from './json-values.js';

/**
 * What the fuzzer does to a valid request: values of the wrong type, missing and extra fields,
 * lengths at and past the limits, numbers no integer holds, unicode edge cases, keys that reach
 * into prototypes, and, on the wire, JSON text cut short or carrying bytes that are not UTF-8.
 * Every mutation is plain data drawn by fast-check and applied deterministically, so a failure
 * replays from its seed and shrinks.
 */

export const PROTO_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__', 'isPrototypeOf'] as const;

/** Strings that have broken parsers, path checks, name rules and encoders elsewhere. */
export const EDGE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\uD800',
  '\uDFFF',
  'x\uD83D',
  '\uDE00x',
  '\u202Eevil.txt',
  '\u200F\u200E',
  '\uFEFF',
  '\uFFFE\uFFFF',
  'e\u0301',
  '\u{1F9E8}',
  '\u{10FFFF}',
  '\uFF41\uFF42',
  '..',
  '../x',
  '/',
  '//',
  'a/../b',
  './a',
  '.git/config',
  '%',
  '%00',
  '%zz',
  '%2F',
  '*',
  '?',
  '*?*?*?*?*?*?*?*?*?*?*?*?zz',
  '[',
  '\\',
  '\n',
  '\r\n',
  '\u2028',
  '\t',
  'HEAD',
  '@',
  '@{',
  'a.lock',
  '-x',
  ...PROTO_KEYS,
  'null',
  'true',
  '0',
  '-1',
  '1e400',
  '${x}',
  '<script>',
  '\'"',
] as const;

/** Lengths around the limits the API states (64, 100, 255/256, 1024, 2048, 4096, 16 KiB, 64 KiB). */
const BOUNDARY_LENGTHS = [63, 64, 65, 100, 101, 128, 129, 255, 256, 257, 1024, 1025, 2048, 2049, 4096, 4097, 16384, 16385, 65536, 65537];

export const edgeString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...EDGE_STRINGS) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 16 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 16 }) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom(...BOUNDARY_LENGTHS), fc.constantFrom('a', 'é', '\u{1F9E8}', '/', '.')).map(([n, c]) => c.repeat(n)) },
);

/** JSON literals `JSON.stringify` never writes. */
const RAW_LITERALS = [
  '1e999999',
  '-1e999999',
  '123456789012345678901234567890',
  '0.0000000000000000000000000000000000000001e-400',
  '-0',
  '1E400',
  '"\\ud800"',
  '"\\udc00\\ud800"',
  '"\\u0000"',
  '{"__proto__":{"polluted":true}}',
  '{"a":1,"a":2}',
  '{"constructor":{"prototype":{"polluted":true}}}',
] as const;

const deepNesting = fc.tuple(fc.constantFrom(64, 1000, 100_000), fc.constantFrom('[]', '{}')).map(([depth, kind]) =>
  kind === '[]' ? new RawJson('['.repeat(depth) + ']'.repeat(depth)) : new RawJson('{"a":'.repeat(depth) + '1' + '}'.repeat(depth)),
);

/** A value of any type, leaning to the ones that break assumptions. */
export const weirdValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom<unknown>(0, -1, 1.5, 2 ** 31, 2 ** 53 + 2, -(2 ** 63), 1e308, -1e308, 5e-324, true, false, null, [], {}, [[]], { '': null }) },
  { weight: 3, arbitrary: edgeString },
  { weight: 2, arbitrary: fc.constantFrom(...RAW_LITERALS).map((text) => new RawJson(text)) },
  { weight: 1, arbitrary: deepNesting },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

export type ValueMutation =
  | { kind: 'replace'; at: number; value: unknown }
  | { kind: 'drop'; at: number }
  | { kind: 'extra'; at: number; key: string; value: unknown }
  | { kind: 'rename'; at: number; key: string }
  | { kind: 'grow'; at: number; length: number };

export const valueMutation: fc.Arbitrary<ValueMutation> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), value: weirdValue }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('drop' as const), at: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('extra' as const),
      at: fc.nat(),
      key: fc.oneof(fc.constantFrom(...PROTO_KEYS), fc.string({ maxLength: 12 }), edgeString),
      value: weirdValue,
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('rename' as const), at: fc.nat(), key: fc.constantFrom(...PROTO_KEYS) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('grow' as const), at: fc.nat(), length: fc.constantFrom(100, 101, 1000, 1001, 10_001) }) },
);

type Container = Record<string, unknown> | unknown[];
interface Slot {
  parent: Container | null;
  key: string | number;
  value: unknown;
}

/** Every node of the value, the root first, with where it hangs. */
function slots(root: unknown): Slot[] {
  const out: Slot[] = [{ parent: null, key: '', value: root }];
  for (let i = 0; i < out.length; i++) {
    const v = out[i]!.value;
    if (v instanceof FixtureRef || v instanceof RawJson) continue;
    if (Array.isArray(v)) v.forEach((item, k) => out.push({ parent: v, key: k, value: item }));
    else if (v && typeof v === 'object') for (const k of Object.keys(v)) out.push({ parent: v as Record<string, unknown>, key: k, value: (v as Record<string, unknown>)[k] });
  }
  return out;
}

function place(slot: Slot, value: unknown, root: unknown): unknown {
  if (!slot.parent) return value;
  if (Array.isArray(slot.parent)) slot.parent[slot.key as number] = value;
  else setOwn(slot.parent, slot.key as string, value);
  return root;
}

/** Roughly how many characters `value` takes as JSON, counting no further than `limit`. */
function approxSize(value: unknown, limit: number): number {
  let size = 0;
  const walk = (v: unknown): void => {
    if (size > limit) return;
    if (typeof v === 'string') size += v.length + 2;
    else if (v instanceof RawJson) size += v.text.length;
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object' && !(v instanceof FixtureRef)) {
      for (const [k, item] of Object.entries(v)) {
        size += k.length + 3;
        walk(item);
      }
    }
    else size += 8;
  };
  walk(value);
  return size;
}

/** A grown array stays within a few MiB of JSON: past the body limits, short of what takes long to build. */
const MAX_GROWN_CHARS = 4 * 1024 * 1024;

/** Applies the mutations in order to a copy of `value`; each picks its node by `at` modulo the node count. */
export function mutateValue(value: unknown, mutations: readonly ValueMutation[]): unknown {
  let root = cloneValue(value);
  for (const m of mutations) {
    const all = slots(root);
    const slot = all[m.at % all.length]!;
    switch (m.kind) {
      case 'replace':
        root = place(slot, m.value, root);
        break;
      case 'drop':
        if (!slot.parent) root = undefined;
        else if (Array.isArray(slot.parent)) slot.parent.splice(slot.key as number, 1);
        else delete slot.parent[slot.key as string];
        break;
      case 'extra': {
        const objects = all.filter((s) => s.value && typeof s.value === 'object' && !Array.isArray(s.value) && !(s.value instanceof FixtureRef) && !(s.value instanceof RawJson));
        if (objects.length) setOwn(objects[m.at % objects.length]!.value as Record<string, unknown>, m.key, m.value);
        else root = place(slot, { [m.key]: m.value }, root);
        break;
      }
      case 'rename':
        if (slot.parent && !Array.isArray(slot.parent)) {
          delete slot.parent[slot.key as string];
          setOwn(slot.parent, m.key, slot.value);
        }
        break;
      case 'grow': {
        const arrays = all.filter((s) => Array.isArray(s.value));
        const target = arrays.length ? arrays[m.at % arrays.length]! : slot;
        const items = Array.isArray(target.value) && target.value.length ? target.value : [target.value];
        const length = Math.min(m.length, Math.max(1, Math.floor(MAX_GROWN_CHARS / Math.max(1, approxSize(items, MAX_GROWN_CHARS) / items.length))));
        root = place(target, Array.from({ length }, (_, i) => cloneValue(items[i % items.length])), root);
        break;
      }
    }
  }
  return root;
}

/** Byte sequences that are not UTF-8 (overlong forms, surrogates, past U+10FFFF, stray bytes) and some that are but surprise. */
export const ODD_BYTES: readonly number[][] = [
  [0xc0, 0xaf],
  [0xe0, 0x80, 0xaf],
  [0xf0, 0x80, 0x80, 0xaf],
  [0xc1, 0xbf],
  [0xff],
  [0xfe],
  [0x80],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0x00],
  [0xe2, 0x80, 0xae],
  [0xef, 0xbb, 0xbf],
];

export type TextMutation =
  | { kind: 'none' }
  | { kind: 'truncate'; fraction: number }
  | { kind: 'inject'; fraction: number; bytes: number[] }
  | { kind: 'prefix'; bytes: number[] }
  | { kind: 'suffix'; text: string }
  | { kind: 'instead'; text: string };

/** Bodies that are not the generated value at all. */
const OTHER_BODIES = ['', ' ', '\r\n', 'null', '[]', '"text"', '0', 'true', '{', '{"', '{"a":', '}', '{}{}', '{} x', 'name=x&y=z', '\u0000', '{"__proto__":1}'];

export const textMutation: fc.Arbitrary<TextMutation> = fc.oneof(
  { weight: 12, arbitrary: fc.constant({ kind: 'none' as const }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('truncate' as const), fraction: fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('inject' as const), fraction: fc.double({ min: 0, max: 1, noNaN: true }), bytes: fc.constantFrom(...ODD_BYTES) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('prefix' as const), bytes: fc.constantFrom(...ODD_BYTES) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('suffix' as const), text: fc.constantFrom(' ', '\n', 'x', '}', ',', '\u0000', '{}') }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('instead' as const), text: fc.oneof(fc.constantFrom(...OTHER_BODIES), fc.string({ unit: 'binary', maxLength: 40 })) }) },
);

export function mutateText(text: string, m: TextMutation): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  switch (m.kind) {
    case 'none':
      return bytes;
    case 'truncate':
      return bytes.subarray(0, Math.floor(bytes.length * m.fraction));
    case 'inject': {
      const at = Math.floor(bytes.length * m.fraction);
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(m.bytes), bytes.subarray(at)]);
    }
    case 'prefix':
      return Buffer.concat([Buffer.from(m.bytes), bytes]);
    case 'suffix':
      return Buffer.concat([bytes, Buffer.from(m.text, 'utf8')]);
    case 'instead':
      return Buffer.from(m.text, 'utf8');
  }
}

/** Path segments and query components written as they are: broken percent-encoding, encoded non-UTF-8, raw high bytes. */
export const RAW_URL_PIECES = [
  '%',
  '%z',
  '%zz',
  'a%',
  '%C0%AF',
  '%E0%80%AF',
  '%ED%A0%80',
  '%F4%90%80%80',
  '%FF',
  '%00',
  '%2F',
  '%2e%2e',
  '..',
  '.',
  '%20',
  '%E2%80%AE',
  '\u00c0\u00af',
  '\u00ff',
  '__proto__',
  'constructor',
  'prototype',
  'a'.repeat(4096),
  '%41'.repeat(3000),
] as const;
