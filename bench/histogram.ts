/**
 * Latency histograms. Values are recorded in integer microseconds (HDR histograms hold integers)
 * and summarized in milliseconds. Histograms cross the generator → orchestrator boundary and land
 * in the JSON report as HDR's compressed base64, so a run can be re-analysed or merged later.
 */
import hdr from 'hdr-histogram-js';
import type { Histogram } from 'hdr-histogram-js';
import type { LatencySummary } from './report-types.js';

export type { Histogram };

export function createHistogram(): Histogram {
  // 3 significant digits over 1 µs … 10 min; autoResize keeps a pathological stall recordable.
  return hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 600_000_000,
    numberOfSignificantValueDigits: 3,
    autoResize: true,
  });
}

export function encodeHistogram(h: Histogram): string {
  return hdr.encodeIntoCompressedBase64(h);
}

export function decodeHistogram(encoded: string): Histogram {
  return hdr.decodeFromCompressedBase64(encoded, 32, false);
}

const US_PER_MS = 1000;

function ms(us: number): number {
  return Math.round((us / US_PER_MS) * 1000) / 1000;
}

export function summarize(h: Histogram): LatencySummary {
  if (h.totalCount === 0) {
    return { count: 0, min: 0, mean: 0, p50: 0, p90: 0, p99: 0, p999: 0, max: 0 };
  }
  return {
    count: h.totalCount,
    min: ms(h.minNonZeroValue),
    mean: ms(h.mean),
    p50: ms(h.getValueAtPercentile(50)),
    p90: ms(h.getValueAtPercentile(90)),
    p99: ms(h.getValueAtPercentile(99)),
    p999: ms(h.getValueAtPercentile(99.9)),
    max: ms(h.maxValue),
  };
}

export function summarizeEncoded(encoded: string): LatencySummary {
  return summarize(decodeHistogram(encoded));
}
