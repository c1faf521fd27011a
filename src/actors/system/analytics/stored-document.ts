/**
 * How the document is stored: as its JSON text, made by the compiled serializer of its schema.
 * The front end then serves the `all` view by splicing the text into the reply — no decoding or
 * re-encoding of a history of 1,000 commits on the request path; only windowed views parse it.
 */
import type { Database, Key } from 'lmdb';
import { getAnalyticsText } from '../../../storage/analytics-store.js';
import { serialize } from '../../../protocol/serializers.js';
import type { AnalyticsDocument } from './document.js';

type Meta = Database<unknown, Key>;

export function encodeDocument(doc: AnalyticsDocument): string {
  return serialize('analyticsDocument', doc);
}

export function readDocumentText(meta: Meta, repoId: string): string | undefined {
  return getAnalyticsText(meta, repoId);
}

export function readDocument(meta: Meta, repoId: string): AnalyticsDocument | undefined {
  const text = readDocumentText(meta, repoId);
  return text === undefined ? undefined : (JSON.parse(text) as AnalyticsDocument);
}
