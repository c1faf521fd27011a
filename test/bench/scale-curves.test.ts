import t from 'tap';
import { CurveBuilder, judge, median, sizeName, targetMetrics } from '../../bench/scale-curves.js';
import type { PhaseResult } from '../../bench/report-types.js';

const points = (...values: Array<[number, number]>) => values.map(([size, value]) => ({ size, value }));

t.test('scale curves - growth is the value at the largest size over the smallest', async (t) => {
  const target = judge([{ label: 'p50', points: points([1000, 2], [1_000_000, 7]) }], { text: '', kind: 'growth', limit: 3, series: ['p50'] });
  t.same(target.outcomes, [{ series: 'p50', value: 3.5, met: false }]);
  t.equal(target.met, false);
});

t.test('scale curves - spread is the largest value over the smallest, whatever the order', async (t) => {
  const target = judge([{ label: 'req/s', points: points([1000, 100], [100_000, 95], [1_000_000, 105]) }], { text: '', kind: 'spread', limit: 1.1, series: ['req/s'] });
  t.same(target.outcomes, [{ series: 'req/s', value: 1.11, met: false }]);
});

t.test('scale curves - a ceiling holds when every point is under it', async (t) => {
  const target = judge([{ label: 'bytes', points: points([900, 30_000], [1200, 31_000]) }], { text: '', kind: 'ceiling', limit: 32_768, series: ['bytes'] });
  t.same(target.outcomes, [{ series: 'bytes', value: 31_000, met: true }]);
  t.equal(target.met, true);
});

t.test('scale curves - one size, or a missing series, cannot be judged', async (t) => {
  const target = judge([{ label: 'p50', points: points([1000, 2]) }], { text: '', kind: 'growth', limit: 3, series: ['p50', 'absent'] });
  t.same(target.outcomes.map((o) => o.met), [null, null]);
  t.equal(target.met, null);
});

t.test('scale curves - the builder sorts points, keeps unjudged series and reports judged ratios as metrics', async (t) => {
  const b = new CurveBuilder('c', 'title', 'files', 'ms');
  b.add('deep p50', 1_000_000, 6);
  b.add('deep p50', 1000, 2);
  b.add('flat p50', 1000, 2);
  const curve = b.build({ text: 'x', kind: 'growth', limit: 3, series: ['deep p50'] });
  t.same(curve.series.map((s) => [s.label, s.points.map((p) => p.size)]), [['deep p50', [1000, 1_000_000]], ['flat p50', [1000]]]);
  t.same(targetMetrics([curve]), { 'c.deep p50': 3 });
  t.equal(curve.target?.met, true, 'exactly the limit holds');
});

t.test('scale curves - sizes read as people say them', async (t) => {
  t.same([1000, 100_000, 1_000_000, 1500, 50].map(sizeName), ['1k', '100k', '1M', '1500', '50']);
});

t.test('scale curves - a point measured in rounds is the median of its rounds', async (t) => {
  t.same([median([3, 1, 2]), median([4, 1, 3, 2]), median([])], [2, 2.5, 0], 'odd, even (mean of the two middle values), none');
  const round = (p50: number, p99: number) => ({ latency: { p50, p99 } }) as PhaseResult;
  const b = new CurveBuilder('c', 'title', 'changes', 'ms');
  b.addLatency(null, 100, [round(2, 20), round(9, 90), round(3, 30)]);
  t.same(b.build().series, [
    { label: 'p50', points: [{ size: 100, value: 3 }] },
    { label: 'p99', points: [{ size: 100, value: 30 }] },
  ]);
});
