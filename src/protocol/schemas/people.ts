import { Type } from '@sinclair/typebox';
import { Closed, DateTime, Nullable } from './body-schema.js';

/**
 * The people of a write (API §5.3): `author` and `committer` (`{name, email, date?}`) and
 * `authors` (1–100 of `{name, email|null}`). Changes and apply-ops take all three, merges the
 * first and the last.
 */
const personInput = Closed({
  name: Type.String({ maxLength: 256 }),
  email: Type.Optional(Nullable(Type.String({ maxLength: 256 }))),
  date: Type.Optional(Nullable(DateTime())),
});
const authorsInput = Type.Array(Closed({ name: Type.String({ maxLength: 256 }), email: Type.Optional(Nullable(Type.String({ maxLength: 256 }))) }), { minItems: 1, maxItems: 100 });

export const people = {
  author: Type.Optional(Nullable(personInput)),
  committer: Type.Optional(Nullable(personInput)),
  authors: Type.Optional(Nullable(authorsInput)),
};
